"""Relevance of chunks and documents, derived from chunking-independent gold evidence.

For an evidence span ``S = [start, end)`` and a chunk ``C = [chunk.start, chunk.end)`` of the
same document, sizes in characters::

    overlap = |S ∩ C|
    "span":   overlap / |S| >= min_fraction      (the chunk holds enough of the evidence)
    "chunk":  overlap / |C| >= min_fraction      (the chunk is mostly evidence)
    "either": "span" or "chunk"                  (default)
    "any":    overlap >= 1

``|S|`` counts the characters of ``S`` that lie in some chunk of the document: whitespace a
chunker trims between chunks does not count, so trimming never changes a verdict. Document-level
evidence (``start is None``) makes every chunk of its document relevant. A chunk's grade is the
maximum grade of the evidence it matches; grade-0 evidence gives grade-0 (judged non-relevant)
entries. With ``min_fraction <= 0.5`` and mode ``either`` every span that touches a chunk has a
relevant chunk, so no non-whitespace span is lost by re-chunking; the proof and the rationale are
in ``docs/relevance.md``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Any

from ragexp.datamodel import Chunk, EvalItem, Evidence, Qrels
from ragexp.errors import RagexpInputError

OVERLAP_MODES = ("either", "span", "chunk", "any")

_START = attrgetter("start")
_END = attrgetter("end")


@dataclass(frozen=True)
class OverlapRule:
    """When a chunk counts as relevant to an evidence span (formulas in the module docstring)."""

    min_fraction: float = 0.5
    mode: str = "either"

    def __post_init__(self) -> None:
        if self.mode not in OVERLAP_MODES:
            raise RagexpInputError(
                f"must be one of {', '.join(OVERLAP_MODES)}, got {self.mode!r}", field="eval.relevance.mode"
            )
        fraction = self.min_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
            raise RagexpInputError(f"must be a number in (0, 1], got {fraction!r}", field="eval.relevance.min_fraction")

    def matches(self, overlap: int, span_size: int, chunk_size: int) -> bool:
        """Whether a chunk of ``chunk_size`` characters, sharing ``overlap`` of them with a span of
        ``span_size`` chunked characters, is relevant to that span."""
        if overlap < 1:
            return False
        if self.mode == "any":
            return True
        if self.mode != "chunk" and overlap / span_size >= self.min_fraction:
            return True
        return self.mode != "span" and overlap / chunk_size >= self.min_fraction

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def doc_qrels(items: Iterable[EvalItem]) -> Qrels:
    """``{item id: {doc id: grade}}``: every document holding evidence, at the maximum grade of its
    evidence, at the default relevance level. Items without evidence map to ``{}``. Independent of
    any chunking."""
    qrels: dict[str, dict[str, int]] = {}
    for item in _unique(items):
        grades: dict[str, int] = {}
        for evidence in item.evidence:
            _check_evidence(item, evidence)
            _raise_grade(grades, evidence.doc_id, evidence.grade)
        qrels[item.id] = grades
    return Qrels(qrels)


def chunk_qrels(
    items: Iterable[EvalItem], chunks_by_doc: Mapping[str, Sequence[Chunk]], rule: OverlapRule = OverlapRule()
) -> Qrels:
    """``{item id: {chunk id: grade}}`` under ``rule``, at the default relevance level; items
    without a relevant chunk map to ``{}``.

    ``chunks_by_doc[doc_id]`` lists a document's chunks in the order a ragexp chunker returns them
    (starts and ends non-decreasing, see :mod:`ragexp.chunking.base`). Evidence in a document
    without chunks (absent, or with neither text nor title) marks no chunk here; a run adds such
    gold under the document id (:func:`ragexp.evaluation.prepared.blank_gold`). Cost per
    span: two bisections plus one step per overlapping chunk.
    """
    qrels: dict[str, dict[str, int]] = {}
    for item in _unique(items):
        grades: dict[str, int] = {}
        for evidence in item.evidence:
            _check_evidence(item, evidence)
            chunks = chunks_by_doc.get(evidence.doc_id)
            if not chunks:
                continue
            if evidence.start is None:
                matched: Iterable[str] = (chunk.id for chunk in chunks)
            else:
                matched = _relevant_chunk_ids(item, evidence, chunks, rule)
            for chunk_id in matched:
                _raise_grade(grades, chunk_id, evidence.grade)
        qrels[item.id] = grades
    return Qrels(qrels)


def _relevant_chunk_ids(item: EvalItem, evidence: Evidence, chunks: Sequence[Chunk], rule: OverlapRule) -> list[str]:
    """Ids of the chunks ``rule`` matches to a span; ``chunks`` in chunker order (starts and ends
    non-decreasing), so the overlapping chunks ``chunks[first:last]`` are found by bisection."""
    start, end = evidence.start, evidence.end
    first = bisect_right(chunks, start, key=_END)
    last = bisect_left(chunks, end, lo=first, key=_START)
    overlapping = chunks[first:last]
    span_size = 0
    covered = start
    for chunk in overlapping:
        high = min(end, chunk.end)
        if high > covered:
            span_size += high - max(chunk.start, covered)
            covered = high
    if span_size == 0:
        raise RagexpInputError(
            f"item {item.id!r}: evidence span [{start}, {end}) of document {evidence.doc_id!r} lies outside "
            "every chunk (whitespace between chunks, or past the end of the document)",
            field="evidence",
        )
    return [
        chunk.id
        for chunk in overlapping
        if rule.matches(min(end, chunk.end) - max(start, chunk.start), span_size, chunk.end - chunk.start)
    ]


def _unique(items: Iterable[EvalItem]) -> Iterator[EvalItem]:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise RagexpInputError(f"duplicate eval item id {item.id!r}", field="id")
        seen.add(item.id)
        yield item


def _check_evidence(item: EvalItem, evidence: Evidence) -> None:
    if evidence.start is None and evidence.end is None:
        return
    start, end = evidence.start, evidence.end
    if start is None or end is None or not 0 <= start < end:
        raise RagexpInputError(
            f"item {item.id!r}: evidence span [{start}, {end}) of document {evidence.doc_id!r} must satisfy "
            "0 <= start < end (an empty span marks nothing)",
            field="evidence",
        )


def _raise_grade(grades: dict[str, int], key: str, grade: int) -> None:
    if grades.get(key, -1) < grade:
        grades[key] = grade
