"""One annotator's judgments of an eval set, in the units two annotators are compared on.

Per item (evidence as loaded: a character span ``[start, end)`` or a whole document, with a grade):

- ``answerable``: the item's flag;
- ``documents``: ``{doc_id: relevant}`` for every document the annotator judged, ``True`` when
  some evidence in it has grade >= 1, ``False`` when all of it is grade 0 (judged negatives only);
- ``regions``: ``{doc_id: ((start, end), ...)}`` the characters covered by grade >= 1 evidence,
  merged into disjoint intervals in order; a whole document is ``[0, len(text))``.

:func:`paired_judgments` matches two annotators' files item by item: the same ids, and under each
id the same question (compared as ``evalset lint`` compares queries), or a one-line error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ragexp.data import Corpus, EvalItem, EvalSet, Evidence
from ragexp.data.lint import normalise_query
from ragexp.errors import RagexpInputError

Interval = tuple[int, int]


@dataclass(frozen=True)
class ItemJudgments:
    id: str
    query: str
    answerable: bool
    evidence: tuple[Evidence, ...]
    documents: Mapping[str, bool]
    regions: Mapping[str, tuple[Interval, ...]]

    @property
    def has_positive(self) -> bool:
        return any(self.regions.values())


def merge(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Disjoint, sorted intervals covering the same characters (touching ones joined)."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((start, end) for start, end in merged)


def item_judgments(item: EvalItem, corpus: Corpus) -> ItemJudgments:
    """The item's judgments (module docstring); whole-document evidence measured in ``corpus``."""
    documents: dict[str, bool] = {}
    spans: dict[str, list[Interval]] = {}
    for evidence in item.evidence:
        relevant = evidence.grade >= 1
        documents[evidence.doc_id] = documents.get(evidence.doc_id, False) or relevant
        if relevant:
            span = (evidence.start, evidence.end) if evidence.is_span else (0, len(corpus[evidence.doc_id].text))
            spans.setdefault(evidence.doc_id, []).append(span)
    regions = {doc_id: merge(intervals) for doc_id, intervals in spans.items()}
    return ItemJudgments(item.id, item.query, item.answerable, item.evidence, documents, regions)


def paired_judgments(first: EvalSet, second: EvalSet, corpus: Corpus) -> list[tuple[ItemJudgments, ItemJudgments]]:
    """Both annotators' judgments of each question, in the first file's order; a
    :class:`RagexpInputError` when the files do not hold the same questions."""
    ours = {item.id: item for item in first}
    theirs = {item.id: item for item in second}
    only_first = [i for i in ours if i not in theirs]
    only_second = [i for i in theirs if i not in ours]
    if only_first or only_second:
        raise RagexpInputError(
            f"the two files hold different questions: {_listed(only_first)} only in {first.source}, "
            f"{_listed(only_second)} only in {second.source}; agreement compares two annotators' judgments "
            "of the same questions (same ids)", file=second.source)
    for item_id, item in ours.items():
        if normalise_query(item.query) != normalise_query(theirs[item_id].query):
            raise RagexpInputError(
                f"item {item_id!r} asks {item.query!r} in {first.source} but {theirs[item_id].query!r} here; "
                "agreement compares judgments of the same question under the same id", file=second.source, field="query")
    return [(item_judgments(item, corpus), item_judgments(theirs[item_id], corpus)) for item_id, item in ours.items()]


def _listed(ids: list[str]) -> str:
    if not ids:
        return "0 items"
    return f"{len(ids)} item{'s' if len(ids) != 1 else ''} (e.g. {ids[0]!r})"
