"""Dense retrieval: bi-encoder embeddings in a FAISS inner-product index.

``score(q, d) = <e(q), e(d)>``; with normalised embeddings (the default) that is cosine.

Index types: ``flat`` (exact), ``hnsw`` (graph; ``hnsw_m`` links per node, ``ef_search`` beam
width at query time), ``ivf`` (k-means lists; ``ivf_nlist`` lists, default ``~4 sqrt(n)``
capped so every list has at least :data:`MIN_TRAIN_PER_LIST` training vectors; ``nprobe``
lists searched per query). IVF cannot be trained on fewer than ``MIN_TRAIN_PER_LIST`` vectors
per list; such a corpus raises :class:`~ragexp.errors.RagexpInputError` naming ``flat``.

Batch search runs on BLAS: faiss 1.15 ships ``distance_compute_blas_threshold = 128000``
queries, so every realistic batch took the scalar scan; :func:`faiss_threads` lowers it to
:data:`BLAS_THRESHOLD` and sets the OpenMP thread count, 1 by default: on shared or
oversubscribed cores (parallel sweep jobs) OpenMP's spin-waiting makes more threads slower than
one (measured in docs/pipelines.md); raise ``threads`` on an idle many-core machine.
The count holds only around FAISS's own work: torch shares the process's OpenMP runtime, and a
count left at 1 ran every later encoding of the process on one core.

With a :class:`~ragexp.runtime.stage_cache.StageCache`, passage embeddings are cached per (encoder identity,
indexed chunks), query embeddings per (encoder identity, queries), and trained ``hnsw``/``ivf``
indexes (``faiss.serialize_index`` bytes, a plain uint8 array) per (embeddings, index params);
beneath those, each distinct text is encoded once per encoder identity across chunkings and runs
(:mod:`ragexp.runtime.text_vectors`).

Cost (:mod:`ragexp.cost`): query encoding is marked as its own stage
(:mod:`ragexp.runtime.stage_clock`), and :meth:`DenseRetriever.index_footprint` gives the index's
bytes (:func:`faiss_index_bytes`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import faiss
import numpy as np

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.models.encoders import BATCH_SIZE
from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.stage_clock import QUERY_ENCODING, stage
from reference_pipelines.base import Ranking
from reference_pipelines.encoders import Encoder, build_encoder
from reference_pipelines.ranking import ChunkTable, check_tie_order

INDEX_TYPES = ("flat", "hnsw", "ivf")
MIN_TRAIN_PER_LIST = 39  # faiss' own k-means warning threshold
BLAS_THRESHOLD = 20  # queries per batch from which faiss computes distances with sgemm


@contextlib.contextmanager
def faiss_threads(threads: int = 1) -> Iterator[None]:
    """FAISS's settings for the block: the BLAS threshold, and ``threads`` OpenMP threads, restored
    to the previous count on exit (the runtime is shared with torch, see the module docstring)."""
    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def faiss_index_bytes(index: faiss.Index) -> int:
    """Bytes the index holds, as ``faiss.serialize_index`` writes them without the copy: the codes
    (``ntotal x code_size``; flat: the vectors), plus the HNSW graph (neighbours and levels as
    int32, offsets as int64) or the IVF centroids (``nlist x d`` float32) and list ids (int64)."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexHNSW):
        hnsw = index.hnsw
        return faiss_index_bytes(index.storage) + 4 * (hnsw.neighbors.size() + hnsw.levels.size()) + 8 * hnsw.offsets.size()
    if isinstance(index, faiss.IndexIVF):
        lists = index.invlists
        n = sum(lists.list_size(i) for i in range(index.nlist))
        return n * (index.code_size + 8) + index.nlist * index.d * 4
    return int(index.ntotal) * int(index.code_size)


def auto_nlist(n_vectors: int) -> int:
    """``round(4 sqrt(n))``, capped at ``n // MIN_TRAIN_PER_LIST``."""
    return min(round(4 * math.sqrt(n_vectors)), n_vectors // MIN_TRAIN_PER_LIST)


class DenseRetriever:
    """``encoder``: an :class:`~reference_pipelines.encoders.Encoder` or its config mapping;
    ``batch_size`` is the encoding batch size when the encoder is built from a mapping; ``ties``:
    order of equal scores (:data:`~reference_pipelines.ranking.TIE_ORDERS`)."""

    def __init__(
        self,
        encoder: Mapping[str, Any] | Encoder | None = None,
        index: str = "flat",
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 200,
        ef_search: int = 128,
        ivf_nlist: int | None = None,
        nprobe: int = 16,
        batch_size: int = BATCH_SIZE,
        threads: int = 1,
        include_title: bool = True,
        ties: str = "trec",
        cache: StageCache | None = None,
    ) -> None:
        if index not in INDEX_TYPES:
            raise RagexpInputError(f"unknown index type {index!r}; use one of {', '.join(INDEX_TYPES)}", field="index")
        if isinstance(encoder, Mapping) or encoder is None:
            encoder = {"model": "minilm", "batch_size": batch_size, **(encoder or {})}
        self.encoder = build_encoder(encoder, cache)
        self.index_type = index
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.ef_search = ef_search
        self.ivf_nlist = ivf_nlist
        self.nprobe = nprobe
        self.threads = threads
        self.include_title = include_title
        self.ties = check_tie_order(ties)
        self.cache = cache
        self._table: ChunkTable | None = None
        self._index: faiss.Index | None = None

    def _cached_array(self, stage: str, parts: Any, compute) -> np.ndarray:
        return compute() if self.cache is None else self.cache.get_or_compute_array(stage, parts, compute)

    def index(self, chunks: Sequence[Chunk]) -> None:
        self._table = table = ChunkTable.from_chunks(chunks, self.include_title, self.ties)
        embedding_key = {"encoder": self.encoder.identity, "chunks": table.fingerprint}
        vectors = self._cached_array("embeddings", embedding_key, lambda: self.encoder.encode_passages(table.texts))
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with faiss_threads(self.threads):
            if self.index_type == "flat":
                self._index = faiss.IndexFlatIP(vectors.shape[1])
                self._index.add(vectors)
                return
            index_key = {"embeddings": embedding_key, "params": self._index_params(len(vectors))}
            serialized = self._cached_array("faiss-index", index_key, lambda: faiss.serialize_index(self._build(vectors)))
            self._index = faiss.deserialize_index(np.ascontiguousarray(serialized, dtype=np.uint8))
        self._set_search_params()

    def _index_params(self, n_vectors: int) -> dict[str, Any]:
        if self.index_type == "hnsw":
            return {"type": "hnsw", "m": self.hnsw_m, "ef_construction": self.hnsw_ef_construction}
        nlist = self.ivf_nlist or auto_nlist(n_vectors)
        if nlist < 1 or n_vectors < MIN_TRAIN_PER_LIST * nlist:
            raise RagexpInputError(
                f"index type 'ivf' cannot hold a corpus of {n_vectors} chunks: k-means training needs "
                f"{MIN_TRAIN_PER_LIST} vectors per list (nlist={max(nlist, 1)} needs >= {MIN_TRAIN_PER_LIST * max(nlist, 1)}); "
                f"use index: flat (exact; fast up to ~1M chunks) or index: hnsw",
                field="index",
            )
        return {"type": "ivf", "nlist": nlist}

    def _build(self, vectors: np.ndarray) -> faiss.Index:
        params = self._index_params(len(vectors))
        dim = vectors.shape[1]
        if params["type"] == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.hnsw_ef_construction
        else:
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, params["nlist"], faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
        index.add(vectors)
        return index

    def _set_search_params(self) -> None:
        if self.index_type == "hnsw":
            self._index.hnsw.efSearch = self.ef_search
        elif self.index_type == "ivf":
            self._index.nprobe = min(self.nprobe, self._index.nlist)

    def index_footprint(self) -> dict[str, int]:
        """``{"vectors_bytes": n x dim x 4, "faiss_bytes": the index as stored}`` (a flat index
        holds the vectors: its ``faiss_bytes`` equal ``vectors_bytes``)."""
        if self._index is None:
            raise RuntimeError("DenseRetriever.index_footprint called before index()")
        return {"vectors_bytes": int(self._index.ntotal) * int(self._index.d) * 4, "faiss_bytes": faiss_index_bytes(self._index)}

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        key = {"encoder": self.encoder.identity, "queries": stable_hash(list(queries))}
        vectors = self._cached_array("query-embeddings", key, lambda: self.encoder.encode_queries(list(queries)))
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        if self._table is None or self._index is None:
            raise RuntimeError("DenseRetriever.search called before index()")
        if not queries:
            return []
        with stage(QUERY_ENCODING):
            vectors = self.encode_queries(queries)
        n_total = self._index.ntotal
        depth = min(k + 1, n_total)  # one extra row tells whether a score tie crosses the cut
        rankings = []
        with faiss_threads(self.threads):
            scores, rows = self._index.search(vectors, depth)
            for i in range(len(queries)):
                query_scores, query_rows = scores[i], rows[i]
                query_depth = depth
                while query_depth < n_total and k < query_depth and query_scores[-1] == query_scores[k - 1]:
                    query_depth = min(2 * query_depth, n_total)
                    found_scores, found_rows = self._index.search(vectors[i : i + 1], query_depth)
                    query_scores, query_rows = found_scores[0], found_rows[0]
                found = query_rows >= 0  # approximate indexes pad with -1 when they find fewer
                rankings.append(self._table.top_k(query_scores[found], k, rows=query_rows[found]))
        return rankings
