"""The protocols every pipeline stage implements.

A ranking is a list of ``(chunk_id, score)`` pairs, best first. Ties in score are broken by
chunk id descending, as trec_eval orders them, so a saved run re-scored by trec_eval ranks
exactly as ragexp did (see :func:`ragexp.metrics.ranking.trec_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragexp.datamodel import Chunk

Ranking = list[tuple[str, float]]


@runtime_checkable
class Retriever(Protocol):
    def index(self, chunks: Sequence[Chunk]) -> None:
        """Build the index over ``chunks`` (called once per distinct chunking)."""

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Return the top ``k`` chunks for each query."""

