"""Sparse BM25 retrieval over chunks: the index and its maths are :mod:`ragexp.text.bm25` (the one
BM25 of ragexp; its docstring has the formulas of every variant), the text pipeline
:class:`ragexp.text.tokenize.Tokenizer`. Top-k selection is an ``argpartition`` over the chunks
with a non-zero term weight for the query; chunks sharing no query term are not returned (a
ranking may be shorter than ``k``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress
from ragexp.runtime.stage_cache import StageCache
from ragexp.text.bm25 import DEFAULT_DELTA, VARIANTS, InvertedIndex, build_index
from ragexp.text.tokenize import Tokenizer
from reference_pipelines.base import Ranking
from reference_pipelines.ranking import ChunkTable, check_tie_order

QUERY_BATCH = 512
#: Score entries one query batch may hold: a batch's sparse ``Q @ W`` has up to ``batch x chunks``
#: of them (12 bytes each), so on a large corpus the batch shrinks to keep it ~200 MB.
BATCH_ENTRIES = 1 << 24
log = logging.getLogger(__name__)


def query_batch(n_chunks: int) -> int:
    """Queries scored per sparse product: :data:`QUERY_BATCH`, fewer where ``batch x n_chunks``
    would pass :data:`BATCH_ENTRIES` (at least one)."""
    return max(1, min(QUERY_BATCH, BATCH_ENTRIES // max(n_chunks, 1)))


class BM25Retriever:
    """BM25 over ``chunk.text_with_title()`` (or ``chunk.text``); the maths in :mod:`ragexp.text.bm25`. ``tokenizer``: a :class:`Tokenizer` or its options (``conf/retrieval/tokenizer/``);
    ``ties``: order of equal scores (:data:`~reference_pipelines.ranking.TIE_ORDERS`)."""

    def __init__(
        self,
        variant: str = "okapi",
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        delta: float | None = None,
        tokenizer: Mapping[str, Any] | Tokenizer | None = None,
        include_title: bool = True,
        ties: str = "trec",
        cache: StageCache | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise RagexpInputError(f"unknown BM25 variant {variant!r}; use one of {', '.join(VARIANTS)}", field="variant")
        if not k1 >= 0 or not 0 <= b <= 1:  # written so that NaN fails too
            raise RagexpInputError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}", field="b" if k1 >= 0 else "k1")
        self.variant = variant
        self.k1 = float(k1)
        self.b = float(b)
        self.epsilon = float(epsilon)
        self.delta = float(DEFAULT_DELTA.get(variant, 0.0) if delta is None else delta)
        self.tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer(**(tokenizer or {}))
        self.include_title = include_title
        self.ties = check_tie_order(ties)
        self.cache = cache
        self._table: ChunkTable | None = None
        self._index: InvertedIndex | None = None
        self.warnings: list[str] = []  # about the last index(); the runner records them with the run

    @property
    def params(self) -> dict[str, Any]:
        """Everything besides the indexed texts that determines the index."""
        return {
            "variant": self.variant,
            "k1": self.k1,
            "b": self.b,
            "epsilon": self.epsilon if self.variant == "okapi" else None,
            "delta": self.delta if self.variant in DEFAULT_DELTA else None,
            "tokenizer": self.tokenizer.config,
        }

    def index(self, chunks: Sequence[Chunk]) -> None:
        self._table = ChunkTable.from_chunks(chunks, self.include_title, self.ties)
        if self.cache is None:
            self._index = self._build(self._table.texts)
            self.warnings = self._degenerate_index_warnings()
            return
        parts = {"params": self.params, "chunks": self._table.fingerprint}
        arrays = self.cache.get_or_compute_arrays("bm25-index", parts, lambda: self._build(self._table.texts).to_arrays())
        self._index = InvertedIndex.from_arrays(arrays)
        self.warnings = self._degenerate_index_warnings()

    def index_footprint(self) -> dict[str, int]:
        """``{"bm25_bytes": the index as stored}``: the CSR term-weight arrays and the vocabulary."""
        _, index = self._require_index()
        return {"bm25_bytes": index.nbytes}

    def _degenerate_index_warnings(self) -> list[str]:
        """A warning when no term can give a document a positive score: every ranking is then
        empty or ordered by scores <= 0, and every metric of the run is 0 for that reason."""
        index = self._index
        if (index.weights.data > 0).any() or (index.match_bonus > 0).any():
            return []
        message = (
            f"bm25 ({self.variant}): no term has a positive weight over these {len(self._table)} chunks (idf <= 0 for "
            "every term: with okapi a term in at least half of the chunks gets idf <= 0), so BM25 rankings are empty "
            "or meaningless; index more or smaller chunks, or use retrieval.variant=lucene or bm25plus (idf > 0) or "
            "dense retrieval"
        )
        log.warning(message)
        return [message]

    def _build(self, texts: Sequence[str]) -> InvertedIndex:
        tokens = (self.tokenizer(text) for text in progress.bar(texts, desc="bm25: tokenising", unit="chunk", leave=False))
        return build_index(tokens, variant=self.variant, k1=self.k1, b=self.b, epsilon=self.epsilon, delta=self.delta)

    def _query_matrix(self, queries: Sequence[str], index: InvertedIndex) -> sp.csr_matrix:
        return index.query_matrix([self.tokenizer(query) for query in queries])

    def _require_index(self) -> tuple[ChunkTable, InvertedIndex]:
        if self._table is None or self._index is None:
            raise RuntimeError("BM25Retriever.search called before index()")
        return self._table, self._index

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        """Dense ``(n_queries, n_chunks)`` scores, row i == rank_bm25's ``get_scores(tokens_i)``."""
        _, index = self._require_index()
        return index.scores([self.tokenizer(query) for query in queries])

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        table, index = self._require_index()
        rankings: list[Ranking] = []
        batch = query_batch(len(table))
        for start in progress.bar(range(0, len(queries), batch), desc="bm25: searching", unit="batch", leave=False):
            q = self._query_matrix(queries[start : start + batch], index)
            scores = (q @ index.weights).tocsr()
            bonus = q @ index.match_bonus
            for i in range(scores.shape[0]):
                lo, hi = scores.indptr[i], scores.indptr[i + 1]
                rankings.append(table.top_k(scores.data[lo:hi] + bonus[i], k, rows=scores.indices[lo:hi]))
        return rankings
