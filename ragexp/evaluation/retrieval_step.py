"""Retrieval for one run: every eval query searched once, reranked, cut into chunk and document
rankings. Each stage goes through the stage cache, keyed by exactly what determines it.

- Chunk rankings: retrieved once at the largest depth any consumer needs
  (:func:`retrieval_depth`: ``max(eval.ks, eval.retrieve_k)``, a reranker's ``top_n``, the
  generator's context), then reranked; every smaller k is a slice of the same list.
- Document rankings: the run's own chunk ranking collapsed to documents
  (:func:`~ragexp.metrics.ranking.doc_level`: each document at its first, best-scoring chunk), so
  ``doc_*`` metrics describe the ranking the run returns. A chunk ranking that holds fewer than k
  distinct documents scores ``doc_*_at_k`` over the documents it holds, as trec_eval does.
- The retriever and reranker configs in the keys name the backend each encoder block actually
  encodes with (:func:`~ragexp.models.encoders.with_effective_backends`): a model configured
  ``onnx`` that ONNX could not export runs on torch and shares a ``backend: torch`` run's entries.
- The retrieval key names the stemming library (:func:`~ragexp.text.tokenize.stemmer_library`):
  a config spells ``stemmer: snowball-english``, but PyStemmer 2 and 3 stem some words apart, so
  rankings cached under one are not handed to a run under the other.
- Warnings the retriever raises about its index (``retriever.warnings``, e.g. BM25 where no term
  has a positive weight) are cached with the rankings, so a cached run records them too.
- Rankings are cached as arrays (:func:`_to_arrays`: unit ids as one UTF-8 text with their
  lengths, scores as float64, each ranking's length), in trec_eval's order; a computed ranking
  goes through the same arrays as a cached one, so both give equal values (JSON took ~1 s per
  24-config demo sweep to decode and its ids and floats round-trip no more exactly).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragexp.config.schema import component_config
from ragexp.cost.index import IndexBuild, timed_index
from ragexp.datamodel import EvalItem
from ragexp.evaluation.job_spec import EvalOptions, JobSpec
from ragexp.evaluation.pipeline import Pipeline
from ragexp.evaluation.prepared import PreparedData
from ragexp.metrics.ranking import Ranking, doc_level, trec_order
from ragexp.models.encoders import with_effective_backends
from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from ragexp.text.tokenize import stemmer_library


@dataclass
class Retrieved:
    """What retrieval produced for every eval item, in eval-set order."""

    rankings: list[Ranking]  # chunk rankings, ``depth`` deep, after the reranker
    doc_rankings: list[Ranking]  # the chunk rankings collapsed to documents
    depth: int
    from_cache: bool
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # the retriever's, e.g. a BM25 index where no term scores
    index_build: IndexBuild | None = None  # how the index was built, None when retrieval came from the cache


def retrieval_depth(options: EvalOptions, pipeline: Pipeline, n_chunks: int) -> int:
    """Retrieve once, at the largest depth any consumer needs, but never deeper than the
    ``n_chunks`` the corpus has (a ranking cannot hold more; a retriever sizes its result arrays
    by the depth asked); every smaller k is a slice."""
    wanted = max([*options.ks, options.retrieve_k, options.context_k, int(getattr(pipeline.reranker, "top_n", 0) or 0)])
    return max(1, min(wanted, n_chunks))


class _Search:
    """Cached searches of one retriever; the index is built on the first cache miss only."""

    def __init__(self, spec: JobSpec, data: PreparedData, pipeline: Pipeline, cache: StageCache) -> None:
        self.cfg, self.data, self.pipeline, self.cache = spec.config, data, pipeline, cache
        self.index_build: IndexBuild | None = None
        self.computed = False
        self.warnings: list[str] = []  # the retriever's, about its index (cached with the rankings)

    def rankings(self, items: Sequence[EvalItem], depth: int) -> list[Ranking]:
        """Rankings of ``items`` at ``depth``, reranked when the pipeline has a reranker."""
        queries = [item.query for item in items]
        key = {
            "retriever": with_effective_backends(component_config(self.cfg.retrieval)),
            "chunking": self.data.chunking_config,
            "corpus": self.data.corpus.fingerprint(),
            "queries": stable_hash(queries),
            "depth": depth,
            "stemmer_library": stemmer_library(),
            "payload": "rankings+warnings as arrays",
        }

        def compute() -> dict[str, np.ndarray]:
            self.computed = True
            if self.index_build is None:
                self.index_build = timed_index(self.pipeline.retriever, self.data.chunks, self.cache)
            found = self.pipeline.retriever.search(queries, depth)
            return _to_arrays(found, getattr(self.pipeline.retriever, "warnings", []))

        stored = self.cache.get_or_compute_arrays("retrieval", key, compute)
        self.warnings = list(dict.fromkeys([*self.warnings, *_split(stored, "warnings")]))
        rankings = _from_arrays(stored)
        if self.pipeline.reranker is None:
            return rankings
        rerank_key = {
            "reranker": with_effective_backends(component_config(self.cfg.reranker)),
            "candidates": stable_hash(rankings),
            "depth": depth,
            "corpus": self.data.corpus.fingerprint(),
            "payload": "rankings as arrays",
        }
        reranked = lambda: _to_arrays(self.pipeline.reranker.rerank(queries, rankings, self.data.chunks_by_id))  # noqa: E731
        return _from_arrays(self.cache.get_or_compute_arrays("rerank", rerank_key, reranked))


def _to_arrays(rankings: Sequence[Ranking], warnings: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """``rankings`` (each in trec_eval's order) and ``warnings`` as the arrays the cache stores:
    ``ids`` (every unit id, concatenated, UTF-8), ``id_lengths`` (characters per id), ``scores``
    (float64), ``lengths`` (units per ranking); warnings the same way."""
    ordered = [trec_order(ranking) for ranking in rankings]
    ids = [cid for ranking in ordered for cid, _ in ranking]
    return {**_texts("ids", ids),
            "scores": np.array([float(score) for ranking in ordered for _, score in ranking], dtype=np.float64),
            "lengths": np.array([len(ranking) for ranking in ordered], dtype=np.int64),
            **_texts("warnings", list(warnings))}


def _texts(name: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
    joined = "".join(texts).encode("utf-8", "surrogatepass")
    return {name: np.frombuffer(joined, dtype=np.uint8), _lengths_name(name): np.array([len(t) for t in texts], dtype=np.int64)}


def _lengths_name(name: str) -> str:
    """Where the per-text lengths of ``name`` are stored: ``ids`` -> ``id_lengths``."""
    return f"{name.rstrip('s')}_lengths"


def _cut(items: Sequence, lengths: np.ndarray) -> list:
    """``items`` cut into consecutive pieces of ``lengths``."""
    ends = np.cumsum(lengths).tolist()
    return [items[start:end] for start, end in zip([0, *ends[:-1]], ends)]


def _split(arrays: Mapping[str, np.ndarray], name: str) -> list[str]:
    """The texts :func:`_texts` stored under ``name``."""
    return _cut(arrays[name].tobytes().decode("utf-8", "surrogatepass"), arrays[_lengths_name(name)])


def _from_arrays(arrays: Mapping[str, np.ndarray]) -> list[Ranking]:
    """The rankings :func:`_to_arrays` stored, as ``(unit id, score)`` lists."""
    return _cut(list(zip(_split(arrays, "ids"), arrays["scores"].tolist())), arrays["lengths"])


def retrieval_step(spec: JobSpec, data: PreparedData, pipeline: Pipeline, cache: StageCache) -> Retrieved:
    """Chunk and document rankings of every eval item (see the module docstring)."""
    items = data.evalset.items
    depth = retrieval_depth(spec.eval, pipeline, len(data.chunks))
    search = _Search(spec, data, pipeline, cache)
    started = time.perf_counter()
    rankings = search.rankings(items, depth)
    from_cache = not search.computed
    timings = {"retrieval_s": time.perf_counter() - started}
    return Retrieved(
        rankings=rankings,
        doc_rankings=[doc_level(ranking) for ranking in rankings],
        depth=depth,
        from_cache=from_cache,
        timings=timings,
        warnings=search.warnings,
        index_build=search.index_build,
    )
