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
    read ``q``; each may carry ``"grade": g`` (default 1; 0 = judged non-relevant).
    ``gold_chunk_ids`` (the method article's ``"doc_112#chunk_4"``) become the span of that chunk
    under the header's ``chunking``, so the loaded item no longer depends on any chunking.
    Identical spans of one item are kept once.

Gold checked against today's corpus (docs/living-evalset.md)
    The header's ``documents`` records the SHA-256 of each gold document's text when its gold was
    marked. A recorded document whose hash is unchanged costs that one compare. A span with its quote
    that no longer reads it is *moved* when the quote occurs exactly once in its document (the item
    is re-anchored there, :attr:`EvalSetReading.moved`), else *stale*; a bare span (or chunk id) in a
    recorded document that changed is stale (it kept nothing to find itself again); evidence in a
    recorded document, or a span with its quote, whose document is gone is stale. (A quote without
    a span is located anew at every load, as before: not found, it is unresolved gold.) Stale evidence is a
    :data:`STALE_GOLD` problem (:attr:`EvalSetReading.stale`), and :func:`load_evalset` refuses
    the whole set at once with one line and the full list in a file. A bare span or chunk id whose
    document the header does not record cannot be verified: counted
    (:attr:`EvalSetReading.unverifiable`) and said in the eval set's warnings.

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
import json
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from os import PathLike
from pathlib import Path

from ragexp.chunking import make_chunker
from ragexp.chunking.base import Chunker
from ragexp.datamodel import CHUNK_SEPARATOR, Chunk, Corpus, EvalItem, EvalSet, Evidence, text_sha256
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
STALE_GOLD = "stale-gold"

#: Why a gold evidence is stale: its text is no longer in its document, it is there more than once,
#: its document changed and a bare span kept nothing to find itself again, its document is gone.
STALE_REASONS = ("changed", "ambiguous", "unverifiable-change", "document-gone")
#: Characters of a span's text quoted in messages and the stale list.
_SHOWN = 80

_MAX_IDS_FOR_SUGGESTIONS = 100_000


@dataclass(frozen=True)
class EvalSetProblem:
    """A content error met while reading an eval set; ``kind`` is one of the module's kind constants."""

    kind: str
    error: RagexpInputError


@dataclass(frozen=True)
class MovedSpan:
    """A span whose quote moved within its document: ``[start, end)`` as written, ``[new_start, new_end)`` now."""

    item: str
    doc_id: str
    start: int
    end: int
    new_start: int
    new_end: int


@dataclass(frozen=True)
class StaleSpan:
    """Gold evidence that no longer holds: ``reason`` one of :data:`STALE_REASONS`; ``read`` what
    it read when marked (``None``: not recorded), ``reads_now`` what ``[start, end)`` reads today
    (``None``: the document is gone or the span lies outside it)."""

    item: str
    doc_id: str
    start: int | None
    end: int | None
    read: str | None
    reads_now: str | None
    reason: str
    line: int
    field: str

    def describe(self) -> str:
        where = f" [{self.start}, {self.end})" if self.start is not None else ""
        read = f" read {shorten(self.read[:_SHOWN])}" if self.read is not None else ""
        now = ("its document is gone" if self.reason == "document-gone"
               else f"now reads {shorten(self.reads_now[:_SHOWN])}" if self.reads_now is not None else "now lies outside it")
        return f"item {self.item!r}, document {self.doc_id!r}{where}{read}, {now} ({self.reason})"


@dataclass
class EvalSetReading:
    """An eval set as read: items (each with the evidence that did resolve), the line each item
    starts on, every content problem in file order, and the gold check (module docstring):
    spans re-anchored, stale evidence, and how many spans could not be verified."""

    evalset: EvalSet
    item_lines: list[int]
    problems: list[EvalSetProblem]
    visible_quotes: int = 0  # quotes in converted documents found by their visible text, not verbatim
    moved: list[MovedSpan] = field(default_factory=list)
    stale: list[StaleSpan] = field(default_factory=list)
    unverifiable: int = 0  # bare spans and chunk ids in documents the header records no text of


def load_evalset(path: str | PathLike[str], corpus: Corpus) -> EvalSet:
    """Load an eval set and resolve its evidence against ``corpus``; any error raises. Stale gold
    raises first, as one line over all of it (:func:`stale_gold_error`)."""
    reading = read_evalset(path, corpus)
    if reading.stale:
        raise stale_gold_error(Path(path), corpus, reading.stale)
    if reading.problems:
        raise reading.problems[0].error
    return reading.evalset


def stale_gold_error(path: Path, corpus: Corpus, stale: list[StaleSpan]) -> RagexpInputError:
    """One line over every stale evidence: how many, the items and documents (the first few), the
    first one described, the file holding the full list (:func:`write_stale_list`) and the fix."""
    items = list(dict.fromkeys(s.item for s in stale))
    docs = list(dict.fromkeys(s.doc_id for s in stale))
    listed = write_stale_list(path, stale)
    fix = f"ragexp evalset reanchor {path} --corpus {corpus.source or 'CORPUS'}"
    if any(s.reason == "unverifiable-change" for s in stale):
        fix += " --old-corpus OLD_CORPUS"
    return RagexpInputError(
        f"gold no longer reads what it read: {len(stale)} evidence of {len(items)} item(s) ({_first(items)}) in "
        f"{len(docs)} document(s) ({_first(docs)}); e.g. {stale[0].describe()}; full list: {listed}; fix: {fix} "
        "(docs/living-evalset.md)", file=path)


def write_stale_list(path: Path, stale: list[StaleSpan]) -> Path:
    """Every stale evidence as JSON Lines beside the eval set (``<name>.stale-gold.jsonl``), or in
    the temporary folder when that folder is read-only; the file's path."""
    text = "".join(json.dumps(asdict(s), ensure_ascii=False) + "\n" for s in stale)
    target = path.with_name(path.name + ".stale-gold.jsonl")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError:
        target = Path(tempfile.gettempdir()) / target.name
        target.write_text(text, encoding="utf-8")
    return target


def gold_check_meta(reading: EvalSetReading) -> dict:
    """What a run records of its gold check (``meta.gold`` of its results): counts and every move."""
    return {"moved": len(reading.moved), "unverifiable": reading.unverifiable,
            "moves": [asdict(m) for m in reading.moved]}


def gold_check_warnings(reading: EvalSetReading) -> list[str]:
    """The lines a run and lint say about the gold check: spans re-anchored, spans unverifiable."""
    lines = []
    if reading.moved:
        items = list(dict.fromkeys(m.item for m in reading.moved))
        lines.append(f"gold moved: {len(reading.moved)} span(s) of {len(items)} item(s) ({_first(items)}) no longer sat "
                     "where they were marked and were found again, once, in their document; this run re-anchors them "
                     "(meta.gold.moves lists each); ragexp evalset reanchor writes them into the eval set")
    if reading.unverifiable:
        lines.append(f"gold cannot be verified: {reading.unverifiable} bare span(s) or chunk id(s) keep no record of what "
                     "they read (no quote, no record of their document's text): if a document changed since they were "
                     "marked, this run scores other text; ragexp evalset reanchor EVALSET --corpus CORPUS --old-corpus CORPUS_THEY_WERE_MARKED_ON "
                     "records it (docs/living-evalset.md)")
    return lines


def _first(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def read_evalset(path: str | PathLike[str], corpus: Corpus) -> EvalSetReading:
    """Read an eval set, raising structural errors and collecting content problems."""
    path = Path(path)
    file = read_file(path)
    name, chunking = file.header.name, file.header.chunking
    if not file.items:
        raise RagexpInputError(
            "the eval set holds no items; add one item per line (JSONL) or under items: (YAML)", file=path
        )
    reader = _ItemReader(path, corpus, chunking, file.header_line, file.header.documents or {})
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
    reading = EvalSetReading(evalset=evalset, item_lines=[line for line, _ in file.items], problems=reader.problems,
                             visible_quotes=reader.visible_quotes, moved=reader.moved, stale=reader.stale,
                             unverifiable=reader.unverifiable)
    meta["gold"] = gold_check_meta(reading)
    if warnings := gold_check_warnings(reading):
        meta["warnings"] = warnings
    return reading


def evalset_to_jsonl(evalset: EvalSet, corpus: Corpus) -> str:
    """The eval set in the ragexp JSONL format with every evidence written as it was resolved
    against ``corpus`` (whole document, or ``start``/``end`` span with the ``quote`` it reads), and
    the header's ``documents`` recording each gold document's text (:func:`gold_header`);
    :func:`load_evalset` reads it back to the same :meth:`~ragexp.datamodel.EvalSet.fingerprint`."""
    records = [
        ItemRecord(
            id=item.id, query=item.query, gold_answer=item.gold_answer, answers=item.answers, key_facts=item.key_facts,
            tags=item.tags, answerable=item.answerable, source=item.source, added=item.added, annotator=item.annotator,
            evidence=tuple(EvidenceRecord(doc_id=e.doc_id, start=e.start, end=e.end, grade=e.grade,
                                          quote=corpus[e.doc_id].text[e.start:e.end] if e.is_span else None)
                           for e in item.evidence),
        )
        for item in evalset
    ]
    return dumps_file(gold_header(HeaderRecord(name=evalset.name), records, corpus), records)


def gold_header(header: HeaderRecord, items: Sequence[ItemRecord], corpus: Mapping) -> HeaderRecord:
    """``header`` with ``documents`` recording the SHA-256 of the text, as ``corpus`` has it now,
    of every document whose evidence in ``items`` all says what it reads (a span with its quote,
    a quote, a whole document): the text their gold was marked against. A document holding a bare
    span or a chunk id keeps what ``header`` recorded of it, if anything: today's text would vouch
    for offsets nobody checked against it. Documents no evidence names are dropped."""
    recorded = dict(header.documents or {})
    bare = {c.rpartition(CHUNK_SEPARATOR)[0] for item in items for c in item.gold_chunk_ids}
    bare |= {e.doc_id for item in items for e in item.evidence if e.start is not None and e.quote is None}
    used = bare | {e.doc_id for item in items for e in item.evidence}
    for doc_id in used - bare:
        if doc_id in corpus:
            recorded[doc_id] = text_sha256(corpus[doc_id].text)
    return replace(header, documents={d: h for d, h in sorted(recorded.items()) if d in used} or None)


# --- resolving items -------------------------------------------------------------------------


class _ItemReader:
    """Turns raw item objects into :class:`EvalItem` s, resolving evidence against the corpus."""

    def __init__(self, path: Path, corpus: Corpus, chunking: dict | None, header_line: int | None,
                 documents: Mapping[str, str]) -> None:
        self.path = path
        self.documents = documents  # the header's record of each gold document's text
        self._changed: dict[str, bool] = {}
        self.moved: list[MovedSpan] = []
        self.stale: list[StaleSpan] = []
        self.unverifiable = 0
        self._item = ""
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

    def changed(self, doc_id: str) -> bool | None:
        """Whether document ``doc_id``'s text differs from the header's record of it (one hash per
        document); ``None`` when the header records none."""
        if doc_id not in self.documents:
            return None
        if doc_id not in self._changed:
            self._changed[doc_id] = text_sha256(self.corpus[doc_id].text) != self.documents[doc_id]
        return self._changed[doc_id]

    def stale_evidence(self, line: int, field: str, doc_id: str, start: int | None, end: int | None,
                       read: str | None, reason: str) -> None:
        document = self.corpus.get(doc_id)
        reads_now = None
        if document is not None and start is not None and 0 <= start < end <= len(document.text):
            reads_now = document.text[start:end]
        stale = StaleSpan(self._item, doc_id, start, end, read, reads_now, reason, line, field)
        self.stale.append(stale)
        self.problem(STALE_GOLD, f"stale gold: {stale.describe()}; the document changed since the gold was marked — "
                                 "ragexp evalset reanchor moves what it can and lists the rest for a person "
                                 "(docs/living-evalset.md)", line, field)

    def read_item(self, line: int, record: ItemRecord) -> EvalItem:
        self._item = record.id
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
            if doc_id in self.documents or (quote is not None and start is not None):  # there when it was marked
                self.stale_evidence(line, f"{field}.doc_id", doc_id, start, end, quote, "document-gone")
            else:
                self.problem(UNRESOLVED_GOLD, self._unknown_document(doc_id), line, f"{field}.doc_id")
            return None
        if quote is not None and start is not None:
            if not (0 <= start < end <= len(document.text) and document.text[start:end] == quote):
                places = _occurrences(document.text, quote)
                if len(places) != 1:
                    self.stale_evidence(line, field, doc_id, start, end, quote, "ambiguous" if places else "changed")
                    return None
                self.moved.append(MovedSpan(self._item, doc_id, start, end, places[0], places[0] + len(quote)))
                start, end = places[0], places[0] + len(quote)
        elif quote is not None:
            span = self._locate_quote(document.id, document.text, quote, entry.occurrence, line, f"{field}.quote")
            if span is None:
                return None
            start, end = span
        elif start is not None:
            if not self._bare_span_holds(line, field, doc_id, start, end):
                return None
        return Evidence(doc_id=doc_id, start=start, end=end, grade=entry.grade)

    def _bare_span_holds(self, line: int, field: str, doc_id: str, start: int, end: int) -> bool:
        """A span without its quote (or a chunk's span): in range, and in a document unchanged
        since the header's record of it; one whose document is unrecorded counts as unverifiable."""
        changed = self.changed(doc_id)
        if changed:
            self.stale_evidence(line, field, doc_id, start, end, None, "unverifiable-change")
            return False
        length = len(self.corpus[doc_id].text)
        if not 0 <= start < end <= length:
            self.problem(UNRESOLVED_GOLD, self._bad_span(doc_id, start, end, length), line, field)
            return False
        self.unverifiable += changed is None
        return True

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
            if doc_id in self.documents:
                self.stale_evidence(line, field, doc_id, None, None, None, "document-gone")
            else:
                self.problem(UNRESOLVED_GOLD, self._unknown_document(doc_id), line, field)
            return None
        if self.changed(doc_id):
            self.stale_evidence(line, field, doc_id, None, None, None, "unverifiable-change")
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
        self.unverifiable += self.changed(doc_id) is None
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
