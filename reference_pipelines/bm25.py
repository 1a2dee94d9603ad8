"""Sparse BM25 retrieval, vectorised over an inverted index held as a scipy CSR matrix.

Per term ``t`` and document ``d`` with ``tf = tf(t, d) > 0``, ``N`` documents, ``df`` documents
containing ``t``, ``L = 1 - b + b * len(d) / avgdl``:

=========  ==========================================  ====================================================
variant    idf(t)                                      weight w(t, d)
=========  ==========================================  ====================================================
okapi      ln(N - df + 0.5) - ln(df + 0.5); negative   idf * tf (k1 + 1) / (tf + k1 L)
           values floored to ``epsilon * mean idf``
bm25l      ln(N + 1) - ln(df + 0.5)                    idf * tf (k1 + 1)(c + delta) / (k1 + c + delta),
                                                       c = tf / L
bm25plus   ln((N + 1) / df)                            idf * (tf (k1 + 1) / (k1 L + tf)); every document
                                                       also gets ``idf * delta`` per query term
lucene     ln(1 + (N - df + 0.5) / (df + 0.5))         idf * tf / (tf + k1 L)
=========  ==========================================  ====================================================

``score(q, d) = sum over query tokens t (with repeats) of w(t, d)`` — exactly rank_bm25's
``BM25Okapi`` / ``BM25L`` / ``BM25Plus.get_scores`` on the same tokens (its BM25L multiplies by
``tf`` once more than Lv & Zhai's formula; kept for identity), and bm25s' ``method="lucene"``.
Weights are precomputed per (term, document), so a batch of queries is one sparse product
``Q @ W`` and top-k selection is an ``argpartition`` over the documents with a non-zero term
weight for the query; documents sharing no query term are not returned (a ranking may be
shorter than ``k``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ragexp.data import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.base import Ranking
from reference_pipelines.ranking import ChunkTable, check_tie_order
from reference_pipelines.tokenize import Tokenizer

VARIANTS = ("okapi", "bm25l", "bm25plus", "lucene")
DEFAULT_DELTA = {"bm25l": 0.5, "bm25plus": 1.0}  # rank_bm25's defaults
QUERY_BATCH = 512
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InvertedIndex:
    """``weights[t, d] = w(t, d)`` (CSR, terms x documents) and the vocabulary it is keyed by."""

    weights: sp.csr_matrix
    vocabulary: dict[str, int]
    match_bonus: np.ndarray  # per term, added to every document once per query occurrence (bm25plus)

    def to_arrays(self) -> dict[str, np.ndarray]:
        terms = list(self.vocabulary)
        encoded = [term.encode("utf-8") for term in terms]
        return {
            "data": self.weights.data,
            "indices": self.weights.indices,
            "indptr": self.weights.indptr,
            "shape": np.array(self.weights.shape, dtype=np.int64),
            "term_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "term_ends": np.cumsum([len(e) for e in encoded], dtype=np.int64),
            "match_bonus": self.match_bonus,
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> InvertedIndex:
        blob = arrays["term_bytes"].tobytes()
        ends = arrays["term_ends"].tolist()
        starts = [0, *ends[:-1]]
        terms = [blob[s:e].decode("utf-8") for s, e in zip(starts, ends)]
        weights = sp.csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"].tolist())
        )
        return cls(weights, {term: i for i, term in enumerate(terms)}, arrays["match_bonus"])


def _idf(variant: str, df: np.ndarray, n_docs: int, epsilon: float) -> np.ndarray:
    if variant == "okapi":
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        floor = epsilon * idf.mean() if len(idf) else 0.0
        return np.where(idf < 0, floor, idf)
    if variant == "bm25l":
        return math.log(n_docs + 1) - np.log(df + 0.5)
    if variant == "bm25plus":
        return np.log((n_docs + 1) / df)
    return np.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def _term_weights(variant: str, idf: np.ndarray, tf: np.ndarray, norm: np.ndarray, k1: float, delta: float) -> np.ndarray:
    """``w(t, d)`` for aligned arrays: ``idf`` of the term, ``tf``, ``norm = L`` of the document."""
    if variant == "okapi":
        return idf * (tf * (k1 + 1) / (tf + k1 * norm))
    if variant == "bm25l":
        ctd = tf / norm
        return idf * tf * (k1 + 1) * (ctd + delta) / (k1 + ctd + delta)
    if variant == "bm25plus":
        return idf * ((tf * (k1 + 1)) / (k1 * norm + tf))
    return idf * (tf / (tf + k1 * norm))


class BM25Retriever:
    """BM25 over ``chunk.text_with_title()`` (or ``chunk.text``); see the module docstring for the
    maths. ``tokenizer``: a :class:`Tokenizer` or its options (``conf/retrieval/tokenizer/``);
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
        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        doc_len = np.zeros(len(texts), dtype=np.int64)
        for doc, text in enumerate(progress.bar(texts, desc="bm25: tokenising", unit="chunk", leave=False)):
            tokens = self.tokenizer(text)
            doc_len[doc] = len(tokens)
            term_ids.extend([vocabulary.setdefault(token, len(vocabulary)) for token in tokens])
        n_docs, n_terms = len(texts), len(vocabulary)
        if n_docs == 0:
            raise RagexpInputError("cannot build a BM25 index over zero chunks", field="chunks")
        # (term, doc) pairs -> term frequencies, sorted by term then doc: the CSR layout
        doc_of_token = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
        pairs, tf = np.unique(np.array(term_ids, dtype=np.int64) * n_docs + doc_of_token, return_counts=True)
        indptr = np.searchsorted(pairs // n_docs, np.arange(n_terms + 1))
        tf = sp.csr_matrix((tf.astype(np.float64), pairs % n_docs, indptr), shape=(n_terms, n_docs))
        df = np.diff(tf.indptr).astype(np.float64)
        idf = _idf(self.variant, df, n_docs, self.epsilon)
        avgdl = doc_len.sum() / n_docs
        norm = 1 - self.b + self.b * doc_len / avgdl if avgdl > 0 else np.ones(n_docs)
        term_of_entry = np.repeat(np.arange(n_terms), np.diff(tf.indptr))
        data = _term_weights(self.variant, idf[term_of_entry], tf.data, norm[tf.indices], self.k1, self.delta)
        weights = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape)
        match_bonus = idf * self.delta if self.variant == "bm25plus" else np.zeros(n_terms)
        return InvertedIndex(weights, vocabulary, match_bonus)

    def _query_matrix(self, queries: Sequence[str], vocabulary: dict[str, int]) -> sp.csr_matrix:
        """Row ``i`` counts the in-vocabulary tokens of query ``i`` (repeats count)."""
        rows, cols = [], []
        for i, query in enumerate(queries):
            for token in self.tokenizer(query):
                term = vocabulary.get(token)
                if term is not None:
                    rows.append(i)
                    cols.append(term)
        shape = (len(queries), len(vocabulary))
        return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)  # duplicates are summed

    def _require_index(self) -> tuple[ChunkTable, InvertedIndex]:
        if self._table is None or self._index is None:
            raise RuntimeError("BM25Retriever.search called before index()")
        return self._table, self._index

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        """Dense ``(n_queries, n_chunks)`` scores, row i == rank_bm25's ``get_scores(tokens_i)``."""
        _, index = self._require_index()
        q = self._query_matrix(queries, index.vocabulary)
        return (q @ index.weights).toarray() + (q @ index.match_bonus)[:, None]

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        table, index = self._require_index()
        rankings: list[Ranking] = []
        for start in progress.bar(range(0, len(queries), QUERY_BATCH), desc="bm25: searching", unit="batch", leave=False):
            q = self._query_matrix(queries[start : start + QUERY_BATCH], index.vocabulary)
            scores = (q @ index.weights).tocsr()
            bonus = q @ index.match_bonus
            for i in range(scores.shape[0]):
                lo, hi = scores.indptr[i], scores.indptr[i + 1]
                rankings.append(table.top_k(scores.data[lo:hi] + bonus[i], k, rows=scores.indices[lo:hi]))
        return rankings
