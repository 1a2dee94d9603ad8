"""The ragexp eval-set format, and the resolution of its gold evidence against a corpus.

File layout (full reference: ``docs/evalset-format.md``)
    JSONL: an optional header line ``{"ragexp_evalset": 1, "name": ..., "description": ..., "chunking": {...}}``, then one
    item per line. YAML (``.yaml``/``.yml``): a mapping with optional header keys
    (``ragexp_evalset``, ``name``, ``chunking``) and an ``items:`` list.
Item
    ``{"id": str, "query": str, "evidence": [...], "gold_chunk_ids": [str]?, "gold_answer": str?,
    "answers": [str]?, "key_facts": [str]?, "tags": [str]?, "category": str?, "answerable": bool?}``;
    ``category`` is one more tag; ``answerable`` defaults to true, and an unanswerable item has no
    evidence but grade-0 judged negatives.
Evidence, resolved at load time into chunking-independent :class:`~ragexp.datamodel.Evidence`
    ``{"doc_id": X}`` the whole document; ``{"doc_id": X, "start": s, "end": e}`` the characters
    ``[s, e)``; ``{"doc_id": X, "quote": q}`` the span where ``q`` occurs in the document (it must
    occur exactly once, or ``"occurrence": n`` picks the n-th, 1-based, overlapping occurrences
    counted); ``{"doc_id": X, "start": s, "end": e, "quote": q}`` the span ``[s, e)``, which must still
    read ``q`` (a stale span is reported, never moved); each may carry ``"grade": g`` (default 1;
    0 = judged non-relevant).
    ``gold_chunk_ids`` (the method article's ``"doc_112#chunk_4"``) become the span of that chunk
    under the header's ``chunking``, so the loaded item no longer depends on any chunking.
    Identical spans of one item are kept once.

Two kinds of error
    *Structural*: the file cannot be read as an eval set (malformed JSON/YAML, an item that is not an
    object, a missing, mistyped or unknown field, a bad header). Raised at once, also by lint: the
    input is unusable.
    *Content*: a well-formed item does not fit the corpus or the rest of the set (unknown document,
    quote not found or ambiguous, span out of range, chunk index out of range, duplicate id, empty
    query, evidence contradicting ``answerable``). :func:`read_evalset` collects every one so
    ``ragexp evalset lint`` can report them all; :func:`load_evalset` raises the first.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from ragexp.chunking import make_chunker
from ragexp.chunking.base import Chunker
from ragexp.datamodel import CHUNK_SEPARATOR, Chunk, Corpus, EvalItem, EvalSet, Evidence
from ragexp.data.evalset_schema import (
    FORMAT_VERSION,
    EvidenceRecord,
    HeaderRecord,
    ItemRecord,
    dumps_file,
    read_file,
    shorten,
)
from ragexp.data.loaders.quote_hints import quote_hint
from ragexp.data.loaders.visible_text import project, visible_spans
from ragexp.errors import RagexpInputError

# Content-problem kinds (how lint groups them).
UNRESOLVED_GOLD = "unresolved-gold"
DUPLICATE_ID = "duplicate-id"
EMPTY_QUERY = "empty-query"
INCONSISTENT_ITEM = "inconsistent-item"

_MAX_IDS_FOR_SUGGESTIONS = 100_000


@dataclass(frozen=True)
class EvalSetProblem:
    """A content error met while reading an eval set; ``kind`` is one of the module's kind constants."""

    kind: str
    error: RagexpInputError


@dataclass
class EvalSetReading:
    """An eval set as read: items (each with the evidence that did resolve), the line each item
    starts on, and every content problem in file order."""

    evalset: EvalSet
    item_lines: list[int]
    problems: list[EvalSetProblem]
    visible_quotes: int = 0  # quotes in converted documents found by their visible text, not verbatim


def load_evalset(path: str | PathLike[str], corpus: Corpus) -> EvalSet:
    """Load an eval set and resolve its evidence against ``corpus``; any error raises."""
    reading = read_evalset(path, corpus)
    if reading.problems:
        raise reading.problems[0].error
    return reading.evalset


def read_evalset(path: str | PathLike[str], corpus: Corpus) -> EvalSetReading:
    """Read an eval set, raising structural errors and collecting content problems."""
    path = Path(path)
    file = read_file(path)
    name, chunking = file.header.name, file.header.chunking
    if not file.items:
        raise RagexpInputError(
            "the eval set holds no items; add one item per line (JSONL) or under items: (YAML)", file=path
        )
    reader = _ItemReader(path, corpus, chunking, file.header_line)
    items: list[EvalItem] = []
    first_line_of: dict[str, int] = {}
    for line, record in file.items:
        item = reader.read_item(line, record)
        if item.id in first_line_of:
            reader.problem(
                DUPLICATE_ID,
                f"duplicate item id {item.id!r} (first on line {first_line_of[item.id]}); ids must be unique so "
                "per-query results stay comparable across runs — rename one",
                line,
                "id",
            )
        first_line_of.setdefault(item.id, line)
        items.append(item)
    meta = {"format": f"ragexp/{FORMAT_VERSION}"} | ({"chunking": dict(chunking)} if chunking is not None else {})
    evalset = EvalSet(items=items, source=str(path), name=name or path.stem, meta=meta)
    return EvalSetReading(evalset=evalset, item_lines=[line for line, _ in file.items], problems=reader.problems,
                          visible_quotes=reader.visible_quotes)


def evalset_to_jsonl(evalset: EvalSet) -> str:
    """The eval set in the ragexp JSONL format with every evidence written as it was resolved
    (whole document or ``start``/``end`` span); :func:`load_evalset` reads it back to the same
    :meth:`~ragexp.datamodel.EvalSet.fingerprint`."""
    records = [
        ItemRecord(
            id=item.id, query=item.query, gold_answer=item.gold_answer, answers=item.answers, key_facts=item.key_facts,
            tags=item.tags, answerable=item.answerable, source=item.source, added=item.added, annotator=item.annotator,
            evidence=tuple(EvidenceRecord(doc_id=e.doc_id, start=e.start, end=e.end, grade=e.grade) for e in item.evidence),
        )
        for item in evalset
    ]
    return dumps_file(HeaderRecord(name=evalset.name), records)


# --- resolving items -------------------------------------------------------------------------


class _ItemReader:
    """Turns raw item objects into :class:`EvalItem` s, resolving evidence against the corpus."""

    def __init__(self, path: Path, corpus: Corpus, chunking: dict | None, header_line: int | None) -> None:
        self.path = path
        self.corpus = corpus
        self.chunking = chunking
        self.header_line = header_line
        self.problems: list[EvalSetProblem] = []
        self._chunker: Chunker | None = None
        self._chunks: dict[str, list[Chunk]] = {}
        self._projections: dict[str, tuple[str, list[int]]] = {}
        self.visible_quotes = 0

    def problem(self, kind: str, message: str, line: int, field: str) -> None:
        error = RagexpInputError(message, file=self.path, line=line, field=field)
        self.problems.append(EvalSetProblem(kind, error))

    def read_item(self, line: int, record: ItemRecord) -> EvalItem:
        entries, chunk_ids, answerable = record.evidence, record.gold_chunk_ids, record.answerable
        query = record.query
        evidence = [self._evidence(line, f"evidence[{i}]", entry) for i, entry in enumerate(entries)]
        evidence += [self._chunk_evidence(line, f"gold_chunk_ids[{i}]", cid) for i, cid in enumerate(chunk_ids)]
        resolved = self._deduplicate([e for e in evidence if e is not None], line)

        if not query.strip():
            self.problem(EMPTY_QUERY, "the query is empty; write the question or remove the item", line, "query")
        elif not visible_text(query):
            self.problem(EMPTY_QUERY, "the query has only invisible characters (zero-width or other format characters, "
                         "Unicode category Cf); write the question or remove the item", line, "query")
        if answerable and not evidence:
            self.problem(
                INCONSISTENT_ITEM,
                'an answerable item needs gold evidence; add "evidence" (doc_id, span or quote) or '
                '"gold_chunk_ids", or set "answerable": false if the corpus does not answer it',
                line,
                "evidence",
            )
        elif answerable and resolved and all(e.grade == 0 for e in resolved):
            self.problem(
                INCONSISTENT_ITEM,
                "every evidence has grade 0 (non-relevant), so nothing counts as gold; grade the evidence >= 1",
                line,
                "evidence",
            )
        if not answerable and (chunk_ids or any(entry.grade != 0 for entry in entries)):
            field = "evidence" if entries else "gold_chunk_ids"
            self.problem(
                INCONSISTENT_ITEM,
                'an item with "answerable": false cannot have gold evidence (grade-0 judged negatives are allowed); remove '
                'the evidence or the flag',
                line,
                field,
            )
        return EvalItem(
            id=record.id,
            query=query,
            evidence=tuple(resolved),
            gold_answer=record.gold_answer,
            answers=record.answers,
            key_facts=record.key_facts,
            tags=tuple(dict.fromkeys([*record.tags, *([record.category] if record.category else [])])),
            answerable=answerable,
            source=record.source,
            added=record.added,
            annotator=record.annotator,
        )

    def _evidence(self, line: int, field: str, entry: EvidenceRecord) -> Evidence | None:
        doc_id, start, end, quote = entry.doc_id, entry.start, entry.end, entry.quote
        document = self.corpus.get(doc_id)
        if document is None:
            self.problem(UNRESOLVED_GOLD, self._unknown_document(doc_id), line, f"{field}.doc_id")
            return None
        if quote is not None and start is not None:
            if not (0 <= start < end <= len(document.text) and document.text[start:end] == quote):
                self.problem(UNRESOLVED_GOLD, self._stale_span(document.text, doc_id, start, end, quote), line, field)
                return None
        elif quote is not None:
            span = self._locate_quote(document.id, document.text, quote, entry.occurrence, line, f"{field}.quote")
            if span is None:
                return None
            start, end = span
        elif start is not None and not 0 <= start < end <= len(document.text):
            self.problem(UNRESOLVED_GOLD, self._bad_span(doc_id, start, end, len(document.text)), line, field)
            return None
        return Evidence(doc_id=doc_id, start=start, end=end, grade=entry.grade)

    @staticmethod
    def _stale_span(text: str, doc_id: str, start: int, end: int, quote: str) -> str:
        found = text[max(0, start):max(0, min(end, len(text)))]
        elsewhere = list(_occurrences(text, quote))
        where = (f"; the quote now occurs at offset{'s' if len(elsewhere) > 1 else ''} {_list_offsets(elsewhere)}"
                 if elsewhere else "; the quote no longer occurs in it")
        return (f"stale span: document {doc_id!r} no longer holds quote {shorten(quote)} at [{start}, {end}) "
                f"(it reads {shorten(found)} there){where}; the document changed since the span was marked — "
                "re-mark it (ragexp evalset annotate shows it) or fix start/end")

    def _locate_quote(
        self, doc_id: str, text: str, quote: str, occurrence: int | None, line: int, field: str
    ) -> tuple[int, int] | None:
        spans = [(start, start + len(quote)) for start in _occurrences(text, quote)]
        converted = self.corpus.conversion is not None and doc_id in self.corpus.conversion.formats
        by_visible_text = False
        if not spans and converted:
            if doc_id not in self._projections:
                self._projections[doc_id] = project(text)
            spans = visible_spans(text, quote, self._projections[doc_id])
            by_visible_text = bool(spans)
        positions = [start for start, _ in spans]
        shown = shorten(quote)
        if not positions:
            hint = quote_hint(text, quote)
            exactly = ("copy the text exactly from the current document (case and whitespace count)" if not converted
                       else f"it is not in the text converted from the {self.corpus.conversion.formats[doc_id].upper()} "
                       "file even ignoring markup, bullets and whitespace (docs/evalset-format.md: converted documents)")
            self.problem(
                UNRESOLVED_GOLD,
                f"quote {shown} not found in document {doc_id!r}{hint}; the document may have changed since the "
                f"eval set was written — {exactly}",
                line,
                field,
            )
            return None
        if occurrence is None and len(positions) > 1:
            self.problem(
                UNRESOLVED_GOLD,
                f"quote {shown} occurs {len(positions)} times in document {doc_id!r} (at offsets "
                f'{_list_offsets(positions)}); add "occurrence": n (1-based) or quote a longer, unique passage',
                line,
                field,
            )
            return None
        index = (occurrence or 1) - 1
        if index >= len(positions):
            self.problem(
                UNRESOLVED_GOLD,
                f"occurrence {occurrence} requested but quote {shown} occurs only {len(positions)} time(s) in "
                f"document {doc_id!r}; fix the occurrence number",
                line,
                field,
            )
            return None
        self.visible_quotes += by_visible_text
        return spans[index]

    def _chunk_evidence(self, line: int, field: str, chunk_id: str) -> Evidence | None:
        doc_id, separator, index = chunk_id.rpartition(CHUNK_SEPARATOR)
        if not separator or not (index.isascii() and index.isdigit()):
            self.problem(UNRESOLVED_GOLD, f"{chunk_id!r} is not a chunk id of the form 'DOC_ID#chunk_N'", line, field)
            return None
        if self.chunking is None:
            self.problem(
                UNRESOLVED_GOLD,
                "gold_chunk_ids only mean something under the chunking that produced them; add a header line "
                '{"ragexp_evalset": 1, "chunking": {...}} naming that chunking, or give the evidence as quotes '
                "or spans",
                line,
                field,
            )
            return None
        if doc_id not in self.corpus:
            self.problem(UNRESOLVED_GOLD, self._unknown_document(doc_id), line, field)
            return None
        chunks = self._chunks_of(doc_id)
        if int(index) >= len(chunks):
            self.problem(
                UNRESOLVED_GOLD,
                f"chunk index {index} out of range: document {doc_id!r} has {len(chunks)} chunk(s) "
                f"(chunk_0..chunk_{len(chunks) - 1}) under the header's chunking; the document or the chunking "
                "changed since the eval set was exported — fix the header chunking or re-export the gold",
                line,
                field,
            )
            return None
        chunk = chunks[int(index)]
        return Evidence(doc_id=doc_id, start=chunk.start, end=chunk.end)

    def _chunks_of(self, doc_id: str) -> list[Chunk]:
        if doc_id not in self._chunks:
            if self._chunker is None:
                self._chunker = self._make_chunker()
            self._chunks[doc_id] = list(self._chunker.chunk(self.corpus[doc_id]))
        return self._chunks[doc_id]

    def _make_chunker(self) -> Chunker:
        try:
            return make_chunker(self.chunking)
        except RagexpInputError as err:
            field = err.field or "chunking"
            raise RagexpInputError(err.message, file=self.path, line=self.header_line, field=field) from None

    def _deduplicate(self, evidence: Iterable[Evidence], line: int) -> list[Evidence]:
        by_span: dict[tuple, Evidence] = {}
        for item in evidence:
            key = (item.doc_id, item.start, item.end)
            seen = by_span.setdefault(key, item)
            if seen.grade != item.grade:
                self.problem(
                    INCONSISTENT_ITEM,
                    f"the same evidence ({_describe_span(item)}) is listed with grades {seen.grade} and {item.grade}; "
                    "keep one",
                    line,
                    "evidence",
                )
        return list(by_span.values())

    def _unknown_document(self, doc_id: str) -> str:
        conversion = self.corpus.conversion
        for file, reason in conversion.skipped if conversion is not None else ():
            if file.rsplit(".", 1)[0] == doc_id:
                return (f"document {doc_id!r} is not in the corpus: its file {file} was skipped when the corpus was "
                        f"read ({reason})")
        suggestion = ""
        if len(self.corpus) <= _MAX_IDS_FOR_SUGGESTIONS:
            close = difflib.get_close_matches(doc_id, list(self.corpus), n=1)
            suggestion = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"unknown document id {doc_id!r}{suggestion}: it is not in the corpus {self.corpus.source} "
            f"({len(self.corpus)} documents); fix the id, or rebuild this gold against the live corpus"
        )

    @staticmethod
    def _bad_span(doc_id: str, start: int, end: int, length: int) -> str:
        if start >= end:
            return f"empty or reversed span [{start}, {end}): start must be < end (end is exclusive)"
        return (
            f"span [{start}, {end}) is out of range for document {doc_id!r} (length {length}); the document may "
            'have changed since the eval set was written — re-locate the evidence, ideally as a "quote"'
        )


def visible_text(text: str) -> str:
    """``text`` without whitespace and format characters (Unicode category Cf: zero-width space,
    joiners, BOM, direction marks), which a tokenizer or an encoder sees as nothing."""
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) != "Cf")


def _occurrences(text: str, quote: str) -> list[int]:
    """Start offsets of every occurrence of ``quote`` in ``text``, overlapping ones included."""
    positions = []
    position = text.find(quote)
    while position != -1:
        positions.append(position)
        position = text.find(quote, position + 1)
    return positions


def _list_offsets(positions: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(p) for p in positions[:limit])
    return shown + (", ..." if len(positions) > limit else "")


def _describe_span(evidence: Evidence) -> str:
    if evidence.is_span:
        return f"{evidence.doc_id} [{evidence.start}, {evidence.end})"
    return f"whole document {evidence.doc_id}"
