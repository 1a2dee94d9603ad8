"""Everything a run reads: the loaders, document conversion, the built-in datasets, and eval-set lint.

What they read into is the data model, :mod:`ragexp.datamodel` (``from ragexp.datamodel import Chunk``),
which sits below the chunkers: an eval set's evidence given by chunk index is resolved here with
the chunking its header names (:mod:`ragexp.data.loaders.evalset`).
"""
