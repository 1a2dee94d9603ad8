"""Comparing runs: side-by-side tables (:mod:`~ragexp.comparison.table`), the distance to the best
run (:mod:`~ragexp.comparison.vs_best`) and the regression gate (:mod:`~ragexp.comparison.gate`), on
the paired small-sample statistics of :mod:`ragexp.metrics.stats`."""
