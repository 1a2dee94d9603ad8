"""The one BM25 of ragexp: an inverted index held as a scipy CSR matrix of term weights, scored
in one sparse product. The reference BM25 pipeline and the annotation page's corpus search use it.

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
``Q @ W`` (:meth:`InvertedIndex.query_matrix`). Tokens come from the caller
(:mod:`ragexp.text.tokenize`), the same for documents and queries.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ragexp.errors import RagexpInputError

VARIANTS = ("okapi", "bm25l", "bm25plus", "lucene")
DEFAULT_DELTA = {"bm25l": 0.5, "bm25plus": 1.0}  # rank_bm25's defaults


@dataclass(frozen=True)
class InvertedIndex:
    """``weights[t, d] = w(t, d)`` (CSR, terms x documents) and the vocabulary it is keyed by."""

    weights: sp.csr_matrix
    vocabulary: dict[str, int]
    match_bonus: np.ndarray  # per term, added to every document once per query occurrence (bm25plus)

    def query_matrix(self, queries: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """Row ``i`` counts the in-vocabulary tokens of query ``i`` (repeats count)."""
        rows, cols = [], []
        for i, tokens in enumerate(queries):
            for token in tokens:
                term = self.vocabulary.get(token)
                if term is not None:
                    rows.append(i)
                    cols.append(term)
        shape = (len(queries), len(self.vocabulary))
        return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)  # duplicates are summed

    def scores(self, queries: Sequence[Sequence[str]]) -> np.ndarray:
        """Dense ``(n_queries, n_documents)`` scores of the tokenised ``queries``."""
        q = self.query_matrix(queries)
        return (q @ self.weights).toarray() + (q @ self.match_bonus)[:, None]

    @property
    def nbytes(self) -> int:
        """Bytes of the index as stored (:meth:`to_arrays`): term weights, vocabulary, bonuses."""
        return sum(array.nbytes for array in self.to_arrays().values())

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


def build_index(documents: Iterable[Sequence[str]], *, variant: str = "okapi", k1: float = 1.5, b: float = 0.75,
                epsilon: float = 0.25, delta: float = 0.0) -> InvertedIndex:
    """The index of tokenised ``documents`` (module docstring; rank_bm25's defaults). Read once,
    one document at a time (a generator of token lists is never held whole); each corpus token is
    kept as an 8-byte term id in an array, not as a Python object, until the sort into postings."""
    vocabulary: dict[str, int] = {}
    term_ids = array("q")
    doc_len = array("q")
    for tokens in documents:
        doc_len.append(len(tokens))
        term_ids.extend([vocabulary.setdefault(token, len(vocabulary)) for token in tokens])
    n_docs, n_terms = len(doc_len), len(vocabulary)
    if n_docs == 0:
        raise RagexpInputError("cannot build a BM25 index over zero chunks", field="chunks")
    doc_len = np.frombuffer(doc_len, dtype=np.int64)
    # (term, doc) pairs -> term frequencies, sorted by term then doc: the CSR layout
    keys = np.frombuffer(term_ids, dtype=np.int64) * n_docs
    del term_ids
    keys += np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
    keys.sort()  # in place: np.unique would sort a copy
    starts = np.flatnonzero(np.r_[keys.size > 0, keys[1:] != keys[:-1]])
    pairs, tf = keys[starts], np.diff(np.r_[starts, keys.size])
    del keys, starts
    indptr = np.searchsorted(pairs // n_docs, np.arange(n_terms + 1))
    tf = sp.csr_matrix((tf.astype(np.float64), pairs % n_docs, indptr), shape=(n_terms, n_docs))
    df = np.diff(tf.indptr).astype(np.float64)
    idf = _idf(variant, df, n_docs, epsilon)
    avgdl = doc_len.sum() / n_docs
    norm = 1 - b + b * doc_len / avgdl if avgdl > 0 else np.ones(n_docs)
    term_of_entry = np.repeat(np.arange(n_terms), np.diff(tf.indptr))
    data = _term_weights(variant, idf[term_of_entry], tf.data, norm[tf.indices], k1, delta)
    weights = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape)
    match_bonus = idf * delta if variant == "bm25plus" else np.zeros(n_terms)
    return InvertedIndex(weights, vocabulary, match_bonus)
