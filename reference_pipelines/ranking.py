"""The chunks a retriever indexed, and how rankings are cut from score vectors over them.

Every retriever keeps a :class:`ChunkTable`: row ``i`` is the ``i``-th indexed chunk. A score
vector over (some of) the rows becomes a :data:`~reference_pipelines.base.Ranking` by
:meth:`ChunkTable.top_k`: best score first, equal scores in the table's tie order, including at
the cut-off, so the top ``k`` never depends on index internals. Tie orders (:data:`TIE_ORDERS`):
``trec`` -- chunk id descending, the order trec_eval scores ties in; ``corpus`` -- row order
(documents as loaded, chunks in document order), which hybrid fusion uses so that the spelling of
an id never decides which of two equally scored chunks gets the better rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime.fingerprint import stable_hash
from reference_pipelines.base import Ranking


def indexed_text(chunk: Chunk, include_title: bool) -> str:
    return chunk.text_with_title() if include_title else chunk.text


TIE_ORDERS = ("trec", "corpus")


def check_tie_order(ties: str) -> str:
    if ties not in TIE_ORDERS:
        raise RagexpInputError(f"unknown tie order {ties!r}; use one of {', '.join(TIE_ORDERS)}", field="ties")
    return ties


@dataclass(frozen=True)
class ChunkTable:
    ids: list[str]
    texts: list[str]
    fingerprint: str  # SHA-256 over (id, indexed text) of every row, in row order
    tiebreak: np.ndarray  # rows with equal scores come out in increasing tiebreak[row]

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk], include_title: bool, ties: str = "trec") -> ChunkTable:
        ids = [chunk.id for chunk in chunks]
        if len(set(ids)) != len(ids):
            raise ValueError("chunk ids must be unique")
        texts = [indexed_text(chunk, include_title) for chunk in chunks]
        if check_tie_order(ties) == "corpus":
            tiebreak = np.arange(len(ids), dtype=np.int64)
        else:  # position of ids[i] when the ids are sorted descending
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


def sort_ranking(pairs: Sequence[tuple[str, float]], position: Mapping[str, int] | None = None) -> Ranking:
    """Order ``(chunk_id, score)`` pairs best first; equal scores by ``position[chunk_id]``
    (corpus order) when given, else by chunk id descending (trec_eval's order)."""
    if position is not None:
        return sorted(pairs, key=lambda pair: (-pair[1], position[pair[0]]))
    by_id_desc = sorted(pairs, key=lambda pair: pair[0], reverse=True)
    return sorted(by_id_desc, key=lambda pair: -pair[1])
