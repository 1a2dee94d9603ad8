"""Rankings and the order trec_eval scores them in.

A ranking is a list of ``(unit_id, score)`` pairs, where a unit is a chunk (``"doc#chunk_i"``)
or a whole document. trec_eval ignores the order it is given: it sorts each query's results by
score descending and breaks ties by unit id descending (``strcmp`` on the UTF-8 bytes, which
for Python ``str`` is the same as code-point order). :func:`trec_order` reproduces that order,
so a ranking re-scored by trec_eval ranks exactly as ragexp ranked it.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter

from ragexp.datamodel import CHUNK_SEPARATOR

Ranking = list[tuple[str, float]]

_SCORE_THEN_ID = itemgetter(1, 0)


def trec_order(ranking: Iterable[tuple[str, float]]) -> Ranking:
    """Sort by score descending, ties by unit id descending (trec_eval's order)."""
    return sorted(ranking, key=_SCORE_THEN_ID, reverse=True)


def document_id(unit_id: str) -> str:
    """The document a unit belongs to: ``"doc_112#chunk_4"`` -> ``"doc_112"``; other ids are their own document."""
    doc_id, separator, _ = unit_id.rpartition(CHUNK_SEPARATOR)
    return doc_id if separator else unit_id


def doc_level(ranking: Iterable[tuple[str, float]]) -> Ranking:
    """Collapse a chunk ranking into a document ranking.

    A document's score is its best chunk's score; documents are in :func:`trec_order`.
    """
    best: dict[str, float] = {}
    for unit_id, score in ranking:
        doc_id = document_id(unit_id)
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    return trec_order(best.items())
