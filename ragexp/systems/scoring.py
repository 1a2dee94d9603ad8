"""A black-box system's passages as units, and their relevance by the same overlap rule.

Units. A placed passage is the unit ``<doc_id>#chunk_<start>-<end>`` (its document is the part
before ``#chunk_``, as for a ragexp chunk, so document-level metrics collapse it the same way) with
``[start, end)`` its place; a passage that could not be placed is ``unlocated:<hash of its text, document and path>`` (``.n``
appended for its n-th occurrence in one query), a unit no evidence matches and no other passage
shares, so it keeps its own rank and counts as not relevant at both levels: two identical passages
from two documents (ambiguous text-only) are two units at their two ranks, never merged. A
query's ranking is its units in the order the system returned them (a unit repeated within a query
is kept once, at its first rank), scored ``n - rank`` so trec_eval keeps that order.

Relevance (:func:`pooled_qrels`) is :class:`~ragexp.metrics.relevance.OverlapRule` applied to
the run's POOL: every unit the system returned for any query, which is its index as far as the
run saw it (TREC pooling). Two counts differ from a ragexp chunking, because a black box does not
give its tiling:

- a span's size: a ragexp run counts the span's characters that lie in some chunk of the document
  (whitespace a chunker trims between chunks does not count). A black box's chunks are unknown,
  so the span counts with the whitespace at its two ends left out (and its overlaps are measured
  on that trimmed span). The two counts differ only where a span crosses whitespace a chunker left
  between two chunks; for the demo's evidence under ``fixed-512`` they are equal for every span
  (tests/test_systems_native_equality.py).
- the relevant units a query has (recall's denominator): the pooled units the rule matches, plus
  one unit (``unreturned:<doc>:<start>-<end>``) for every relevant span that no pooled unit
  matches, so evidence the system never returned is a relevant unit it missed, never dropped.
  Units of its index that no query returned are unknown; on the demo a native BM25 run returns
  every one of the 514 ``fixed-512`` chunks somewhere in its top 100, so the pool is its tiling.

Gold in a document with neither text nor title is the document id, exactly as a ragexp run counts
it (:func:`ragexp.evaluation.prepared.blank_gold`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragexp.datamodel import Chunk, Corpus, EvalItem, Qrels
from ragexp.metrics.relevance import OverlapRule
from ragexp.runtime.fingerprint import stable_hash
from ragexp.systems.locate import Placement
from ragexp.systems.response import Passage

UNLOCATED_PREFIX = "unlocated:"
UNRETURNED_PREFIX = "unreturned:"


def unit_of(passage: Passage, placement: Placement, corpus: Corpus | Mapping, occurrence: int = 1) -> Chunk:
    """The unit a passage is scored as (module docstring); ``occurrence``: how many times this
    unplaced passage (text, document and path) has come so far in its query's list, this one included."""
    if placement.located:
        document = corpus[placement.doc_id]
        return Chunk(id=f"{placement.doc_id}#chunk_{placement.start}-{placement.end}", doc_id=placement.doc_id, index=-1,
                     start=placement.start, end=placement.end, text=document.text[placement.start:placement.end],
                     title=document.title)
    name = stable_hash([passage.text, passage.doc_id, passage.path])[:16]
    suffix = f".{occurrence}" if occurrence > 1 else ""
    return Chunk(id=f"{UNLOCATED_PREFIX}{name}{suffix}", doc_id=placement.doc_id or "", index=-1,
                 start=0, end=0, text=passage.text, title=passage.title or "")


@dataclass(frozen=True)
class Ranked:
    """One query's units, best first, and how many passages repeated an earlier unit."""

    units: tuple[Chunk, ...]
    duplicates: int

    def ranking(self) -> list[tuple[str, float]]:
        return [(unit.id, float(len(self.units) - rank)) for rank, unit in enumerate(self.units)]


def ranked(units: Sequence[Chunk]) -> Ranked:
    kept: dict[str, Chunk] = {}
    for unit in units:
        kept.setdefault(unit.id, unit)
    return Ranked(tuple(kept.values()), len(units) - len(kept))


def trimmed_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without the whitespace at its two ends (empty: ``start == end``)."""
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    if lead == len(piece):
        return start, start
    return start + lead, end - (len(piece) - len(piece.rstrip()))


def pooled_qrels(items: Sequence[EvalItem], pool: Sequence[Chunk], corpus: Corpus | Mapping, rule: OverlapRule,
                 not_indexed: set[str]) -> tuple[Qrels, int]:
    """``({item id: {unit id: grade}}, number of unreturned relevant spans)`` (module docstring), the
    qrels at the default relevance level."""
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for unit in pool:
        if unit.start < unit.end:
            by_doc[unit.doc_id].append(unit)
    qrels: dict[str, dict[str, int]] = {}
    unreturned = 0
    for item in items:
        grades: dict[str, int] = {}

        def raise_grade(key: str, grade: int) -> None:
            if grades.get(key, -1) < grade:
                grades[key] = grade

        for evidence in item.evidence:
            if evidence.doc_id in not_indexed or evidence.doc_id not in corpus:
                if evidence.relevant:
                    raise_grade(evidence.doc_id, evidence.grade)
                continue
            units = by_doc.get(evidence.doc_id, [])
            if evidence.start is None:
                matched = [u.id for u in units]
                missing = f"{UNRETURNED_PREFIX}{evidence.doc_id}"
            else:
                start, end = trimmed_span(corpus[evidence.doc_id].text, evidence.start, evidence.end)
                size = end - start
                matched = [u.id for u in units if size > 0 and rule.matches(min(end, u.end) - max(start, u.start), size,
                                                                            u.end - u.start)]
                missing = f"{UNRETURNED_PREFIX}{evidence.doc_id}:{evidence.start}-{evidence.end}"
            for unit_id in matched:
                raise_grade(unit_id, evidence.grade)
            if not matched and evidence.relevant:
                raise_grade(missing, evidence.grade)
                unreturned += 1
        qrels[item.id] = grades
    return Qrels(qrels), unreturned
