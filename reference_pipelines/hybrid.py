"""Hybrid retrieval: fuse the rankings of several retrievers for the same query.

Each retriever returns its top ``k`` chunks (``k`` is the run's one retrieval depth); a chunk's
fused score is

- ``rrf``: ``sum_i 1 / (rrf_k + rank_i)``, ``rank_i`` 1-based in list ``i``; lists that do not
  contain the chunk add nothing (Cormack et al., 2009). Weights are ignored.
- ``weighted``: ``sum_i w_i * norm_i(score_i)``, ``w`` rescaled to sum to 1 (a convex
  combination; default equal weights). For two retrievers ``weight=a`` is short for
  ``weights=[a, 1 - a]``: one knob to sweep (``retrieval.weight=0.1,0.3,0.5``). ``norm_i`` is
  per query and per list: ``minmax`` ``(s - min) / (max - min)`` (all 1.0 when max == min) or ``zscore``
  ``(s - mean) / std`` (all 0.0 when std == 0). A chunk missing from list ``i`` counts as that
  list's floor: 0 for ``minmax``, the list's minimum z for ``zscore``.

Ties never depend on how ids are spelled: inside every list, and in the fused list before it is
cut to ``k``, equal scores are ordered by corpus position (documents as loaded, chunks in
document order). Without that, two exact-duplicate documents tie in every list, the copy whose id
sorts last wins every tie (trec_eval's id-descending order) and RRF turns the ties into a strict
win for it. The runner still scores the fused ranking in trec_eval's order.

Configured (``conf/retrieval/hybrid_*.yaml``), a hybrid names its ``components`` (``bm25``,
``dense``) and carries every component's parameters at its own level, composed from
``conf/retrieval/bm25.yaml`` and ``dense.yaml``, so ``retrieval.k1=0.9`` or
``retrieval/tokenizer=plain`` reach its BM25 exactly as they reach ``retrieval=bm25``; each
component takes the parameters its constructor accepts. From Python, ``retrievers`` takes built
retrievers or ``_target_`` mappings instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.stage_clock import FUSION, stage
from reference_pipelines.base import Ranking, Retriever
from reference_pipelines.bm25 import BM25Retriever
from reference_pipelines.dense import DenseRetriever
from reference_pipelines.ranking import sort_ranking

FUSIONS = ("rrf", "weighted")
NORMALIZATIONS = ("minmax", "zscore")
COMPONENTS: dict[str, type] = {"bm25": BM25Retriever, "dense": DenseRetriever}


def normalise_scores(scores: np.ndarray, method: str) -> np.ndarray:
    if method == "minmax":
        spread = scores.max() - scores.min()
        return (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


def rrf_fuse(rankings: Sequence[Ranking], rrf_k: float = 60, position: Mapping[str, int] | None = None) -> Ranking:
    """RRF of rankings given best first; fused ties by ``position`` (else id descending)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
    return sort_ranking(list(fused.items()), position)


def weighted_fuse(
    rankings: Sequence[Ranking], weights: Sequence[float], normalization: str = "minmax",
    position: Mapping[str, int] | None = None,
) -> Ranking:
    """Convex fusion of normalised scores; fused ties by ``position`` (else id descending)."""
    total = float(sum(weights))
    candidates = list(dict.fromkeys(chunk_id for ranking in rankings for chunk_id, _ in ranking))
    fused = np.zeros(len(candidates))
    index_of = {chunk_id: i for i, chunk_id in enumerate(candidates)}
    for ranking, weight in zip(rankings, weights):
        if not ranking:
            continue
        normalised = normalise_scores(np.array([score for _, score in ranking], dtype=np.float64), normalization)
        floor = 0.0 if normalization == "minmax" else normalised.min()
        per_candidate = np.full(len(candidates), floor)
        per_candidate[[index_of[chunk_id] for chunk_id, _ in ranking]] = normalised
        fused += (weight / total) * per_candidate
    return sort_ranking(list(zip(candidates, fused.tolist())), position)


def build_components(names: Sequence[str], params: Mapping[str, Any], cache: StageCache | None) -> list[Retriever]:
    """One retriever per name in :data:`COMPONENTS`, each given the ``params`` its constructor
    takes and ties in corpus order; a parameter no component takes is an error naming it."""
    unknown = [name for name in names if name not in COMPONENTS]
    if unknown or not names:
        raise RagexpInputError(
            f"unknown component(s) {unknown or names}; use a list of: {', '.join(COMPONENTS)}", field="components"
        )
    accepted = {name: set(inspect.signature(COMPONENTS[name]).parameters) - {"cache", "ties"} for name in names}
    unused = sorted(set(params) - set().union(*accepted.values()))
    if unused:
        raise RagexpInputError(
            f"not a parameter of the hybrid nor of its components ({', '.join(names)})", field=unused[0]
        )
    return [
        COMPONENTS[name](**{key: value for key, value in params.items() if key in accepted[name]}, ties="corpus", cache=cache)
        for name in names
    ]


class HybridRetriever:
    """Searches every component to the requested depth and fuses their lists per query."""

    def __init__(
        self,
        retrievers: Sequence[Retriever | Mapping[str, Any]] | None = None,
        components: Sequence[str] | None = None,
        fusion: str = "rrf",
        rrf_k: float = 60,
        weights: Sequence[float] | None = None,
        weight: float | None = None,
        normalization: str = "minmax",
        cache: StageCache | None = None,
        **component_params: Any,
    ) -> None:
        if fusion not in FUSIONS:
            raise RagexpInputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}", field="fusion")
        if normalization not in NORMALIZATIONS:
            raise RagexpInputError(f"unknown normalization {normalization!r}; use one of {', '.join(NORMALIZATIONS)}", field="normalization")
        if (retrievers is None) == (components is None):
            raise RagexpInputError("give either components (names) or retrievers (objects or configs)", field="components")
        if retrievers is not None and component_params:
            raise RagexpInputError("component parameters go with components, not with retrievers", field=sorted(component_params)[0])
        self.cache = cache
        if components is not None:
            self.retrievers = build_components(list(components), component_params, cache)
        else:
            self.retrievers = [self._build(r) for r in retrievers]
        if len(self.retrievers) < 2:
            raise RagexpInputError("a hybrid retriever needs at least two retrievers", field="retrievers")
        if weight is not None:
            if weights is not None or len(self.retrievers) != 2 or not 0 <= weight <= 1:
                raise RagexpInputError(
                    "weight (a number in [0, 1]) is shorthand for weights=[weight, 1 - weight] with exactly two "
                    "retrievers; give either weight or weights",
                    field="weight",
                )
            weights = [weight, 1 - weight]
        n = len(self.retrievers)
        weights = [1.0 / n] * n if weights is None else [float(w) for w in weights]
        if len(weights) != n or min(weights) < 0 or sum(weights) <= 0:
            raise RagexpInputError(f"weights must be {n} non-negative numbers with a positive sum, got {weights}", field="weights")
        if rrf_k < 0:
            raise RagexpInputError(f"need rrf_k >= 0, got {rrf_k}", field="rrf_k")
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.weights = weights
        self.normalization = normalization
        self._position: dict[str, int] | None = None

    def _build(self, retriever: Retriever | Mapping[str, Any]) -> Retriever:
        if isinstance(retriever, Mapping):
            from hydra.utils import instantiate

            return instantiate(retriever, cache=self.cache)
        if getattr(retriever, "cache", False) is None:
            retriever.cache = self.cache
        return retriever

    def index(self, chunks: Sequence[Chunk]) -> None:
        self._position = {chunk.id: row for row, chunk in enumerate(chunks)}
        for retriever in self.retrievers:
            retriever.index(chunks)

    @property
    def warnings(self) -> list[str]:
        """The fused retrievers' warnings about their last index()."""
        return [warning for retriever in self.retrievers for warning in getattr(retriever, "warnings", [])]

    def index_footprint(self) -> dict[str, int]:
        """The components' index bytes, summed by kind (``faiss_bytes``, ``bm25_bytes`` ...)."""
        total: dict[str, int] = {}
        for retriever in self.retrievers:
            for kind, size in getattr(retriever, "index_footprint", dict)().items():
                total[kind] = total.get(kind, 0) + size
        return total

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        per_retriever = [retriever.search(queries, k) for retriever in self.retrievers]
        position = self._position
        fused = []
        with stage(FUSION):
            for lists in zip(*per_retriever):
                if position is not None:  # lists from retrievers that order their ties otherwise
                    lists = [sort_ranking(ranking, position) for ranking in lists]
                if self.fusion == "rrf":
                    fused.append(rrf_fuse(lists, self.rrf_k, position)[:k])
                else:
                    fused.append(weighted_fuse(lists, self.weights, self.normalization, position)[:k])
        return fused
