"""Hybrid retrieval: fuse the rankings of several retrievers for the same query.

Each retriever returns its top ``depth`` chunks (at least ``k``); a chunk's fused score is

- ``rrf``: ``sum_i 1 / (rrf_k + rank_i)``, ``rank_i`` 1-based in list ``i``; lists that do not
  contain the chunk add nothing (Cormack et al., 2009). Weights are ignored.
- ``weighted``: ``sum_i w_i * norm_i(score_i)``, ``w`` rescaled to sum to 1 (a convex
  combination; default equal weights). For two retrievers ``weight=a`` is short for
  ``weights=[a, 1 - a]``: one knob to sweep (``retrieval.weight=0.1,0.3,0.5``). ``norm_i`` is
  per query and per list: ``minmax`` ``(s - min) / (max - min)`` (all 1.0 when max == min) or ``zscore``
  ``(s - mean) / std`` (all 0.0 when std == 0). A chunk missing from list ``i`` counts as that
  list's floor: 0 for ``minmax``, the list's minimum z for ``zscore``.

Sub-retrievers are Retriever objects or config mappings with ``_target_``; those built here,
and built ones whose ``cache`` is ``None``, share this retriever's cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragexp.cache import StageCache
from ragexp.data import Chunk
from ragexp.errors import RagexpInputError
from reference_pipelines.base import Ranking, Retriever
from reference_pipelines.ranking import sort_ranking

FUSIONS = ("rrf", "weighted")
NORMALIZATIONS = ("minmax", "zscore")


def normalise_scores(scores: np.ndarray, method: str) -> np.ndarray:
    if method == "minmax":
        spread = scores.max() - scores.min()
        return (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


def rrf_fuse(rankings: Sequence[Ranking], rrf_k: float = 60) -> Ranking:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
    return sort_ranking(list(fused.items()))


def weighted_fuse(rankings: Sequence[Ranking], weights: Sequence[float], normalization: str = "minmax") -> Ranking:
    total = float(sum(weights))
    candidates = list(dict.fromkeys(chunk_id for ranking in rankings for chunk_id, _ in ranking))
    fused = np.zeros(len(candidates))
    position = {chunk_id: i for i, chunk_id in enumerate(candidates)}
    for ranking, weight in zip(rankings, weights):
        if not ranking:
            continue
        normalised = normalise_scores(np.array([score for _, score in ranking], dtype=np.float64), normalization)
        floor = 0.0 if normalization == "minmax" else normalised.min()
        per_candidate = np.full(len(candidates), floor)
        per_candidate[[position[chunk_id] for chunk_id, _ in ranking]] = normalised
        fused += (weight / total) * per_candidate
    return sort_ranking(list(zip(candidates, fused.tolist())))


class HybridRetriever:
    """Searches every sub-retriever to ``max(depth, k)`` and fuses their lists per query."""

    def __init__(
        self,
        retrievers: Sequence[Retriever | Mapping[str, Any]],
        fusion: str = "rrf",
        rrf_k: float = 60,
        weights: Sequence[float] | None = None,
        weight: float | None = None,
        normalization: str = "minmax",
        depth: int = 100,
        cache: StageCache | None = None,
    ) -> None:
        if fusion not in FUSIONS:
            raise RagexpInputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}", field="fusion")
        if normalization not in NORMALIZATIONS:
            raise RagexpInputError(f"unknown normalization {normalization!r}; use one of {', '.join(NORMALIZATIONS)}", field="normalization")
        if len(retrievers) < 2:
            raise RagexpInputError("a hybrid retriever needs at least two retrievers", field="retrievers")
        if weight is not None:
            if weights is not None or len(retrievers) != 2 or not 0 <= weight <= 1:
                raise RagexpInputError(
                    "weight (a number in [0, 1]) is shorthand for weights=[weight, 1 - weight] with exactly two "
                    "retrievers; give either weight or weights",
                    field="weight",
                )
            weights = [weight, 1 - weight]
        weights = [1.0 / len(retrievers)] * len(retrievers) if weights is None else [float(w) for w in weights]
        if len(weights) != len(retrievers) or min(weights) < 0 or sum(weights) <= 0:
            raise RagexpInputError(
                f"weights must be {len(retrievers)} non-negative numbers with a positive sum, got {weights}", field="weights"
            )
        if rrf_k < 0 or depth < 1:
            raise RagexpInputError(f"need rrf_k >= 0 and depth >= 1, got rrf_k={rrf_k}, depth={depth}", field="rrf_k" if rrf_k < 0 else "depth")
        self.cache = cache
        self.retrievers = [self._build(r) for r in retrievers]
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.weights = weights
        self.normalization = normalization
        self.depth = depth

    def _build(self, retriever: Retriever | Mapping[str, Any]) -> Retriever:
        if isinstance(retriever, Mapping):
            from hydra.utils import instantiate

            return instantiate(retriever, cache=self.cache)
        if getattr(retriever, "cache", False) is None:
            retriever.cache = self.cache
        return retriever

    def index(self, chunks: Sequence[Chunk]) -> None:
        for retriever in self.retrievers:
            retriever.index(chunks)

    @property
    def warnings(self) -> list[str]:
        """The fused retrievers' warnings about their last index()."""
        return [warning for retriever in self.retrievers for warning in getattr(retriever, "warnings", [])]

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        depth = max(self.depth, k)
        per_retriever = [retriever.search(queries, depth) for retriever in self.retrievers]
        fused = []
        for lists in zip(*per_retriever):
            if self.fusion == "rrf":
                fused.append(rrf_fuse(lists, self.rrf_k)[:k])
            else:
                fused.append(weighted_fuse(lists, self.weights, self.normalization)[:k])
        return fused
