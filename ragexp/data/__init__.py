"""Everything a run reads: the data model, the loaders, the built-in datasets, and eval-set lint.

The data model (:mod:`ragexp.data.model`) is re-exported here: ``from ragexp.data import Chunk``.
"""

from ragexp.data.model import (
    CHUNK_SEPARATOR,
    Chunk,
    Corpus,
    Document,
    EvalItem,
    EvalSet,
    Evidence,
    chunk_id,
)

__all__ = ["CHUNK_SEPARATOR", "Chunk", "Corpus", "Document", "EvalItem", "EvalSet", "Evidence", "chunk_id"]
