"""The chunks a retriever indexed, and how rankings are cut from score vectors over them.

Every retriever keeps a :class:`ChunkTable`: row ``i`` is the ``i``-th indexed chunk. A score
vector over (some of) the rows becomes a :data:`~reference_pipelines.base.Ranking` by
:meth:`ChunkTable.top_k`: best score first, equal scores by chunk id descending (trec_eval's
order), including at the cut-off, so the top ``k`` never depends on index internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragexp.data import Chunk
from ragexp.fingerprint import stable_hash
from reference_pipelines.base import Ranking


def indexed_text(chunk: Chunk, include_title: bool) -> str:
    return chunk.text_with_title() if include_title else chunk.text


@dataclass(frozen=True)
class ChunkTable:
    ids: list[str]
    texts: list[str]
    fingerprint: str  # SHA-256 over (id, indexed text) of every row, in row order
    tiebreak: np.ndarray  # tiebreak[i] = position of ids[i] when ids are sorted descending

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk], include_title: bool) -> ChunkTable:
        ids = [chunk.id for chunk in chunks]
        if len(set(ids)) != len(ids):
            raise ValueError("chunk ids must be unique")
        texts = [indexed_text(chunk, include_title) for chunk in chunks]
        tiebreak = np.empty(len(ids), dtype=np.int64)
        tiebreak[sorted(range(len(ids)), key=ids.__getitem__, reverse=True)] = np.arange(len(ids))
        return cls(ids, texts, stable_hash(list(zip(ids, texts))), tiebreak)

    def __len__(self) -> int:
        return len(self.ids)

    def top_k(self, scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> Ranking:
        """The ``k`` best of ``scores``; ``scores[j]`` belongs to row ``rows[j]`` (default: row ``j``).

        Selection is ``O(n)`` (``argpartition`` to the k-th best value, keeping every row tied
        with it); only the survivors are sorted by ``(-score, id descending)``.
        """
        scores = np.asarray(scores)
        rows = np.arange(len(scores)) if rows is None else np.asarray(rows)
        if k <= 0 or len(scores) == 0:
            return []
        if k < len(scores):
            kth_best = scores[np.argpartition(-scores, k - 1)[k - 1]]
            keep = scores >= kth_best
            scores, rows = scores[keep], rows[keep]
        order = np.lexsort((self.tiebreak[rows], -scores))[:k]
        return [(self.ids[row], float(score)) for row, score in zip(rows[order].tolist(), scores[order].tolist())]


def sort_ranking(pairs: Sequence[tuple[str, float]]) -> Ranking:
    """Order ``(chunk_id, score)`` pairs best first, equal scores by chunk id descending."""
    by_id_desc = sorted(pairs, key=lambda pair: pair[0], reverse=True)
    return sorted(by_id_desc, key=lambda pair: -pair[1])
