"""Comparing runs: side-by-side tables (:mod:`~ragexp.comparison.table`), paired small-sample
statistics (:mod:`~ragexp.comparison.stats`) and the regression gate (:mod:`~ragexp.comparison.gate`)."""
