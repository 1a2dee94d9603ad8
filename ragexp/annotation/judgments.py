"""One annotator's judgments of an eval set, in the units two annotators are compared on.

Per item:

- ``answerable``: the item's flag;
- ``documents``: ``{doc_id: relevant}`` for every document the annotator judged, ``True`` when
  some evidence in it has grade >= 1, ``False`` when all of it is grade 0 (judged negatives only);
- ``regions``: ``{doc_id: ((start, end), ...)}`` the characters covered by grade >= 1 evidence,
  merged into disjoint intervals in order; a whole document is ``[0, len(text))``.

Read with a corpus (:func:`corpus_judgments`), each file is loaded as a run loads it (every
evidence resolved, the first problem raised). Read without one (:func:`file_judgments`), the
records of :mod:`ragexp.data.evalset_schema` are taken as written: document verdicts need no text,
but the characters of a grade >= 1 quote, whole document or ``gold_chunk_ids`` entry are only known
from the corpus, so such an entry raises (documents are not checked against a corpus either).
:func:`paired_judgments` matches two annotators' files item by item: the same ids, and under each
id the same question (compared as ``evalset lint`` compares queries), or a one-line error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from ragexp.data.evalset_schema import read_file
from ragexp.data.lint import normalise_query
from ragexp.datamodel import Corpus, EvalSet, is_relevant
from ragexp.errors import RagexpInputError

Interval = tuple[int, int]


@dataclass(frozen=True)
class ItemJudgments:
    id: str
    query: str
    answerable: bool
    documents: Mapping[str, bool]
    regions: Mapping[str, tuple[Interval, ...]]

    @property
    def has_positive(self) -> bool:
        return any(self.regions.values())


@dataclass(frozen=True)
class Judgments:
    """One file's judgments by item id, in file order; ``annotator``: the one name its items
    record (``None`` when they record none or several)."""

    source: str
    items: Mapping[str, ItemJudgments]
    annotator: str | None


def merge(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Disjoint, sorted intervals covering the same characters (touching ones joined)."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((start, end) for start, end in merged)


def judged(item_id: str, query: str, answerable: bool, entries: Iterable[tuple[str, Interval | None, int]]) -> ItemJudgments:
    """An item's judgments from its evidence as ``(doc_id, characters, grade)``; the characters
    may be ``None`` for grade 0 only (module docstring)."""
    documents: dict[str, bool] = {}
    spans: dict[str, list[Interval]] = {}
    for doc_id, span, grade in entries:
        documents[doc_id] = documents.get(doc_id, False) or is_relevant(grade)
        if is_relevant(grade):
            spans.setdefault(doc_id, []).append(span)
    return ItemJudgments(item_id, query, answerable, documents, {doc_id: merge(s) for doc_id, s in spans.items()})


def corpus_judgments(evalset: EvalSet, corpus: Corpus) -> Judgments:
    """The judgments of an eval set loaded against ``corpus`` (whole documents measured in it)."""
    items = {}
    for item in evalset:
        entries = [(e.doc_id, (e.start, e.end) if e.is_span else (0, len(corpus[e.doc_id].text)), e.grade)
                   for e in item.evidence]
        items[item.id] = judged(item.id, item.query, item.answerable, entries)
    return Judgments(evalset.source, items, _one_name(item.annotator for item in evalset))


def file_judgments(path: str | PathLike[str]) -> Judgments:
    """The judgments of an eval-set file read without a corpus (module docstring)."""
    path = Path(path)
    records = read_file(path).items
    if not records:
        raise RagexpInputError("the eval set holds no items", file=path)
    items = {}
    for line, record in records:
        if record.id in items:
            raise RagexpInputError(f"duplicate item id {record.id!r}; ids must be unique", file=path, line=line, field="id")
        entries = []
        for i, e in enumerate(record.evidence):
            if e.start is not None and not 0 <= e.start < e.end:
                raise RagexpInputError("a span needs 0 <= start < end", file=path, line=line, field=f"evidence[{i}]")
            if e.start is None and is_relevant(e.grade):
                form = "a quote" if e.quote is not None else "a whole document"
                raise RagexpInputError(f"--corpus DIR is needed: this evidence is {form}, whose characters the evidence "
                                       "overlap is counted in", file=path, line=line, field=f"evidence[{i}]")
            entries.append((e.doc_id, None if e.start is None else (e.start, e.end), e.grade))
        if record.gold_chunk_ids:
            raise RagexpInputError("--corpus DIR is needed: gold_chunk_ids are spans of the corpus under the header's "
                                   "chunking", file=path, line=line, field="gold_chunk_ids")
        items[record.id] = judged(record.id, record.query, record.answerable, entries)
    return Judgments(str(path), items, _one_name(record.annotator for _, record in records))


def paired_judgments(first: Judgments, second: Judgments) -> list[tuple[ItemJudgments, ItemJudgments]]:
    """Both annotators' judgments of each question, in the first file's order; a
    :class:`RagexpInputError` when the files do not hold the same questions."""
    ours, theirs = first.items, second.items
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
    return [(item, theirs[item_id]) for item_id, item in ours.items()]


def _one_name(names: Iterable[str | None]) -> str | None:
    distinct = {name for name in names if name is not None}
    return distinct.pop() if len(distinct) == 1 else None


def _listed(ids: list[str]) -> str:
    if not ids:
        return "0 items"
    return f"{len(ids)} item{'s' if len(ids) != 1 else ''} (e.g. {ids[0]!r})"
