"""The eval-set file's records: typed, closed, frozen, with its one reader and one writer.

Every program that reads or writes the eval-set format (the loader, the annotation session,
the page's queue) goes through this module, so a line one of them accepts the others accept too.

Records (field meanings: ``docs/evalset-format.md``)
    :class:`HeaderRecord` ``{"ragexp_evalset": 1, "name", "description", "chunking", "adjudication",
    "documents", "lineage"}`` (``adjudication``: :class:`AdjudicationRecord` ``{"adjudicator", "sources":
    [{"file", "annotator", "sha256"}, {...}]}``, set on a set adjudicated from two annotators' files;
    ``documents``: ``{doc_id: sha256}``, the SHA-256 of each gold document's text when its gold was
    marked (:func:`~ragexp.datamodel.text_sha256`); ``lineage``: :class:`LineageRecord` ``{"file",
    "sha256", "corpus"}``, the eval set this one was re-anchored from);
    :class:`ItemRecord` ``{"id", "query", "evidence", "gold_chunk_ids", "gold_answer", "answers",
    "key_facts", "tags", "category", "answerable", "source", "added", "annotator"}``;
    :class:`EvidenceRecord` ``{"doc_id", "start", "end", "quote", "occurrence", "grade"}``.

Structural rules (a violation raises :class:`~ragexp.errors.RagexpInputError` naming file, line
and field): unknown keys refused; every field of its JSON type (``null`` = absent); ``id`` not
empty; ``grade`` an integer in ``[0, MAX_GRADE]``; ``start``/``end`` both or neither;
``occurrence >= 1`` and only with a quote (and not with a span); a quote not empty; each tag (and
the category) matches :data:`TAG_PATTERN` (tags become metric names such as ``tag/<t>/recall@5``);
``source`` one of :data:`~ragexp.datamodel.ITEM_SOURCES`; ``added`` ISO 8601; ``annotator`` a
non-empty name of at most 64 characters. Whether an item fits its corpus is the loader's concern.

Files are read through :mod:`ragexp.stored.limits` (regular file, size cap, depth, duplicate keys,
numbers within a float). :func:`dumps_line` writes one JSON object per line with the characters
that some line splitters treat as line breaks (U+0085, U+2028, U+2029) escaped, so every reader
re-reads the file it wrote.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import yaml

from ragexp.datamodel import ITEM_SOURCES
from ragexp.errors import RagexpInputError
from ragexp.stored import limits

FORMAT_VERSION = 1
VERSION_KEY = "ragexp_evalset"
HEADER_FIELDS = (VERSION_KEY, "name", "description", "chunking", "adjudication", "documents", "lineage")
LINEAGE_FIELDS = ("file", "sha256", "corpus")
ADJUDICATION_FIELDS = ("adjudicator", "sources")
SOURCE_FIELDS = ("file", "annotator", "sha256")
_SHA256 = re.compile(r"[0-9a-f]{64}")
ITEM_FIELDS = (
    "id", "query", "evidence", "gold_chunk_ids", "gold_answer", "answers", "key_facts", "tags", "category",
    "answerable", "source", "added", "annotator",
)  # fmt: skip
EVIDENCE_FIELDS = ("doc_id", "start", "end", "quote", "occurrence", "grade")
YAML_SUFFIXES = (".yaml", ".yml")
#: Highest relevance grade (0 = judged non-relevant, 1 = relevant, more = more relevant).
MAX_GRADE = 10
#: A tag: letters, digits, ``_`` and ``-``, 1 to 64 characters.
TAG_PATTERN = re.compile(r"[\w-]{1,64}")
MAX_ANNOTATOR = 64

_REQUIRED_HINTS = {
    "id": 'give every item a unique, stable id such as "q017"',
    "query": "write the question as a user would ask it",
    "doc_id": "name the corpus document that holds the evidence",
}
_JSON_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
#: Characters JSON may hold raw that str.splitlines() and JavaScript line terminators split on.
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@dataclass(frozen=True, slots=True)
class EvidenceRecord:
    """One evidence entry as written: a whole document, a span ``[start, end)``, a quote, or both."""

    doc_id: str
    start: int | None = None
    end: int | None = None
    quote: str | None = None
    occurrence: int | None = None
    grade: int = 1


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One eval-set line as written (before its evidence is resolved against a corpus)."""

    id: str
    query: str
    evidence: tuple[EvidenceRecord, ...] = ()
    gold_chunk_ids: tuple[str, ...] = ()
    gold_answer: str | None = None
    answers: tuple[str, ...] = ()
    key_facts: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    category: str | None = None
    answerable: bool = True
    source: str | None = None
    added: str | None = None
    annotator: str | None = None


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One annotator's file an adjudicated set was built from: its name, annotator and SHA-256 then."""

    file: str
    annotator: str | None
    sha256: str


@dataclass(frozen=True, slots=True)
class AdjudicationRecord:
    """Who adjudicated the set, and the two annotators' files it was built from."""

    adjudicator: str
    sources: tuple[SourceRecord, SourceRecord]


@dataclass(frozen=True, slots=True)
class LineageRecord:
    """The eval-set file a re-anchored set came from (its name and SHA-256 then) and the corpus
    it was moved to (its :meth:`~ragexp.datamodel.Corpus.fingerprint`)."""

    file: str
    sha256: str
    corpus: str | None = None


@dataclass(frozen=True, slots=True)
class HeaderRecord:
    """The optional first line; ``chunking`` is the chunker options ``gold_chunk_ids`` refer to;
    ``documents`` the SHA-256 of each gold document's text its gold was marked against."""

    name: str | None = None
    description: str | None = None
    chunking: Mapping | None = None
    adjudication: AdjudicationRecord | None = None
    documents: Mapping[str, str] | None = None
    lineage: LineageRecord | None = None


@dataclass(frozen=True, slots=True)
class EvalSetFile:
    """A whole file: the header (``header_line`` ``None`` when absent) and each item with its line."""

    header: HeaderRecord
    header_line: int | None
    items: tuple[tuple[int, ItemRecord], ...]


# --- reading ---------------------------------------------------------------------------------


def read_file(path: str | PathLike[str]) -> EvalSetFile:
    """An eval-set file (JSONL, or YAML by suffix) as records; structural errors raise."""
    path = Path(path)
    if not path.is_file():
        raise RagexpInputError("no such file; pass the eval set (.jsonl, .yaml or .yml)", file=path)
    text = limits.read_text(path)
    return parse_yaml(text, path) if path.suffix.lower() in YAML_SUFFIXES else parse_jsonl(text, path)


def parse_jsonl(text: str, path: Path) -> EvalSetFile:
    """JSONL ``text`` (an optional header line, then one item per line; lines split on ``\\n`` only),
    holding at most :data:`~ragexp.stored.limits.MAX_JSON_VALUES` values in all (counted first)."""
    limits.check_json_depth(text, source=path, max_depth=sys.maxsize)  # the values; depth per line, named below
    header, header_line, items = HeaderRecord(), None, []
    for line, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        obj = limits.parse_json(raw, source=path, line=line)
        if not isinstance(obj, dict):
            raise RagexpInputError(f"expected a JSON object per line, got {type(obj).__name__}", file=path, line=line)
        if VERSION_KEY in obj:
            if items or header_line is not None:
                raise RagexpInputError("a header line may only come first; move it to the top of the file",
                                       file=path, line=line, field=VERSION_KEY)
            header, header_line = header_from_json(obj, file=path, line=line), line
        else:
            items.append((line, item_from_json(obj, file=path, line=line)))
    return EvalSetFile(header, header_line, tuple(items))


def parse_yaml(text: str, path: Path) -> EvalSetFile:
    """A YAML eval set: a mapping with optional header keys and an ``items:`` list."""
    try:
        limits.parse_yaml(text, source=path)  # the bounds (aliases, depth, duplicate keys) before the walk below
    except RagexpInputError as err:
        if not err.message.startswith("not valid YAML"):
            raise  # else the walk below names the line
    loader = limits.yaml_loader(text)  # the same closed set of types: a date stays the text it is
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise RagexpInputError(f"malformed YAML: {problem}", file=path,
                               line=None if mark is None else mark.line + 1) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise RagexpInputError(
            "a YAML eval set is a mapping with an `items:` list (and optional keys ragexp_evalset, name, chunking)",
            file=path, field="items")
    items_node = next(value for key, value in root.value if key.value == "items")
    lines = [node.start_mark.line + 1 for node in items_node.value]
    header_line = root.start_mark.line + 1
    header = header_from_json({k: v for k, v in data.items() if k != "items"}, file=path, line=header_line)
    items = []
    for line, obj in zip(lines, data["items"], strict=True):
        if not isinstance(obj, dict):
            raise RagexpInputError(f"each item must be a mapping, got {_type_name(obj)}", file=path, line=line,
                                   field="items")
        items.append((line, item_from_json(obj, file=path, line=line)))
    return EvalSetFile(header, header_line, tuple(items))


def header_from_json(obj: Mapping, *, file: Path | None = None, line: int | None = None) -> HeaderRecord:
    """The header line's record; an unsupported version or unknown key raises."""
    fields = Fields(obj, file, line)
    fields.reject_unknown(HEADER_FIELDS, "header")
    version = obj.get(VERSION_KEY, FORMAT_VERSION)
    if version != FORMAT_VERSION or isinstance(version, bool):
        fields.fail(VERSION_KEY, f"unsupported eval-set format version {version!r}; this ragexp reads version "
                                 f"{FORMAT_VERSION}")
    adjudication = fields.value("adjudication", dict)
    documents = fields.value("documents", dict)
    if documents is not None:
        for doc_id, digest in documents.items():
            if not isinstance(doc_id, str) or not doc_id or not isinstance(digest, str) or not _SHA256.fullmatch(digest):
                fields.fail(f"documents.{shorten(doc_id, 40)}", "each document id maps to the SHA-256 of its text "
                                                                 "(64 lower-case hex digits)")
    lineage = fields.value("lineage", dict)
    return HeaderRecord(name=fields.string("name"), description=fields.string("description"),
                        chunking=fields.value("chunking", dict),
                        adjudication=None if adjudication is None else _adjudication(adjudication, file, line),
                        documents=documents, lineage=None if lineage is None else _lineage(lineage, file, line))


def _lineage(obj: Mapping, file: Path | None, line: int | None) -> LineageRecord:
    fields = Fields(obj, file, line, prefix="lineage")
    fields.reject_unknown(LINEAGE_FIELDS, "lineage")
    digest = fields.string("sha256", required=True)
    if not _SHA256.fullmatch(digest):
        fields.fail("sha256", "64 lower-case hex digits")
    return LineageRecord(file=fields.string("file", required=True), sha256=digest, corpus=fields.string("corpus"))


def _adjudication(obj: Mapping, file: Path | None, line: int | None) -> AdjudicationRecord:
    fields = Fields(obj, file, line, prefix="adjudication")
    fields.reject_unknown(ADJUDICATION_FIELDS, "adjudication")
    adjudicator = fields.string("adjudicator", required=True)
    if not valid_annotator(adjudicator):
        fields.fail("adjudicator", f"a name of 1 to {MAX_ANNOTATOR} characters")
    sources = fields.objects("sources")
    if len(sources) != 2:
        fields.fail("sources", "the two annotators' files it was adjudicated from")
    records = []
    for i, source in enumerate(sources):
        entry = Fields(source, file, line, prefix=f"adjudication.sources[{i}]")
        entry.reject_unknown(SOURCE_FIELDS, "source")
        annotator = entry.string("annotator")
        if annotator is not None and not valid_annotator(annotator):
            entry.fail("annotator", f"a name of 1 to {MAX_ANNOTATOR} characters")
        digest = entry.string("sha256", required=True)
        if not _SHA256.fullmatch(digest):
            entry.fail("sha256", "64 lower-case hex digits")
        records.append(SourceRecord(file=entry.string("file", required=True), annotator=annotator, sha256=digest))
    return AdjudicationRecord(adjudicator=adjudicator, sources=(records[0], records[1]))


def item_from_json(obj: Mapping, *, file: Path | None = None, line: int | None = None) -> ItemRecord:
    """One item's record under the module's structural rules."""
    fields = Fields(obj, file, line)
    fields.reject_unknown(ITEM_FIELDS, "item")
    item_id = fields.string("id", required=True)
    query = fields.string("query", required=True)
    entries = fields.objects("evidence")
    if not item_id.strip():
        fields.fail("id", f"must not be empty; {_REQUIRED_HINTS['id']}")
    record = ItemRecord(
        id=item_id,
        query=query,
        evidence=tuple(evidence_from_json(e, file=file, line=line, prefix=f"evidence[{i}]") for i, e in enumerate(entries)),
        gold_chunk_ids=tuple(fields.strings("gold_chunk_ids")),
        gold_answer=fields.string("gold_answer"),
        answers=tuple(fields.strings("answers")),
        key_facts=tuple(fields.strings("key_facts")),
        tags=tuple(fields.tag(f"tags[{i}]", tag) for i, tag in enumerate(fields.strings("tags"))),
        category=fields.tag("category", fields.string("category")),
        answerable=fields.value("answerable", bool) is not False,
        source=fields.choice("source", ITEM_SOURCES),
        added=fields.timestamp("added"),
        annotator=fields.string("annotator"),
    )
    if record.annotator is not None and not valid_annotator(record.annotator):
        fields.fail("annotator", f"a name of 1 to {MAX_ANNOTATOR} characters")
    return record


def valid_annotator(name: str) -> bool:
    """Whether ``name`` may be recorded as an annotator: 1 to :data:`MAX_ANNOTATOR` characters, not all blank."""
    return bool(name.strip()) and len(name) <= MAX_ANNOTATOR


def evidence_from_json(obj: Mapping, *, file: Path | None = None, line: int | None = None,
                       prefix: str = "evidence") -> EvidenceRecord:
    """One evidence entry's record; ``prefix`` names it in errors (``evidence[2]``)."""
    fields = Fields(obj, file, line, prefix=prefix)
    fields.reject_unknown(EVIDENCE_FIELDS, "evidence")
    doc_id = fields.string("doc_id", required=True)
    start, end = fields.value("start", int), fields.value("end", int)
    quote, occurrence = fields.string("quote"), fields.value("occurrence", int)
    grade = fields.value("grade", int)
    grade = 1 if grade is None else grade
    if (start is None) != (end is None):
        fields.fail("start" if start is None else "end", "a span needs both start and end (end exclusive)")
    if quote is not None and start is not None and occurrence is not None:
        fields.fail("occurrence", "a span with its quote names its place already; drop the occurrence")
    if quote == "":
        fields.fail("quote", "must not be empty; copy the evidence text from the document")
    if occurrence is not None and (quote is None or occurrence < 1):
        fields.fail("occurrence", "only a quote takes an occurrence, counted from 1")
    if grade < 0:
        fields.fail("grade", "must be >= 0 (0 = judged non-relevant, >= 1 relevant)")
    if grade > MAX_GRADE:
        fields.fail("grade", f"must be at most {MAX_GRADE} (0 = judged non-relevant, 1..{MAX_GRADE} relevant), got "
                             f"{shorten(grade)}")
    return EvidenceRecord(doc_id=doc_id, start=start, end=end, quote=quote, occurrence=occurrence, grade=grade)


# --- writing ---------------------------------------------------------------------------------


def header_to_json(header: HeaderRecord) -> dict:
    """The header line's object (absent fields left out)."""
    obj: dict = {VERSION_KEY: FORMAT_VERSION}
    for key in ("name", "description", "chunking"):
        if getattr(header, key) is not None:
            obj[key] = getattr(header, key)
    if header.adjudication is not None:
        obj["adjudication"] = {"adjudicator": header.adjudication.adjudicator, "sources": [
            {"file": s.file, **({"annotator": s.annotator} if s.annotator else {}), "sha256": s.sha256}
            for s in header.adjudication.sources]}
    if header.documents:
        obj["documents"] = dict(sorted(header.documents.items()))
    if header.lineage is not None:
        obj["lineage"] = {"file": header.lineage.file, "sha256": header.lineage.sha256,
                          **({"corpus": header.lineage.corpus} if header.lineage.corpus else {})}
    return obj


def evidence_to_json(evidence: EvidenceRecord) -> dict:
    """The evidence entry: absent fields left out, ``grade`` only when not 1."""
    obj = {key: getattr(evidence, key) for key in ("doc_id", "start", "end", "quote", "occurrence")
           if getattr(evidence, key) is not None}
    return obj | ({"grade": evidence.grade} if evidence.grade != 1 else {})


def item_to_json(item: ItemRecord) -> dict:
    """The item line: empty fields left out, ``answerable`` only when false; :func:`item_from_json`
    reads it back to an equal record."""
    obj: dict = {"id": item.id, "query": item.query, "evidence": [evidence_to_json(e) for e in item.evidence]}
    for key in ("gold_chunk_ids", "gold_answer", "answers", "key_facts", "tags", "category"):
        value = getattr(item, key)
        if value:
            obj[key] = list(value) if isinstance(value, tuple) else value
    if not item.answerable:
        obj["answerable"] = False
    for key in ("source", "added", "annotator"):
        if getattr(item, key) is not None:
            obj[key] = getattr(item, key)
    return obj


def dumps_line(obj: Mapping) -> str:
    """``obj`` as one JSON line, non-ASCII kept as is except the line-break characters (module docstring)."""
    text = json.dumps(obj, ensure_ascii=False)
    for char, escaped in _LINE_BREAKS.items():
        text = text.replace(char, escaped)  # only string content can hold them: the JSON stays equal
    return text


def dumps_file(header: HeaderRecord, items: Sequence[ItemRecord]) -> str:
    """A whole JSONL eval set: the header line, then one line per item."""
    return "".join(dumps_line(obj) + "\n" for obj in [header_to_json(header), *(item_to_json(i) for i in items)])


# --- typed field access ----------------------------------------------------------------------


class Fields:
    """Typed access to the fields of one JSON/YAML object; problems raise naming file, line and field."""

    def __init__(self, obj: Mapping, path: Path | None, line: int | None, prefix: str = "") -> None:
        self.obj, self.path, self.line, self.prefix = obj, path, line, prefix

    def fail(self, name: str, message: str):
        field = f"{self.prefix}.{name}" if self.prefix else name
        raise RagexpInputError(message, file=self.path, line=self.line, field=field)

    def reject_unknown(self, known: Sequence[str], what: str) -> None:
        for name in self.obj:
            if name not in known:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                self.fail(str(name), f"unknown {what} field; {hint}known fields: {', '.join(known)}")

    def value(self, name: str, expected: type, required: bool = False):
        """The field's value if present and not null, checked to be of type ``expected``."""
        value = self.obj.get(name)
        if value is None:
            if required:
                hint = f"; {_REQUIRED_HINTS[name]}" if name in _REQUIRED_HINTS else ""
                self.fail(name, f"missing required field{hint}")
            return None
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            self.fail(name, f"must be {_article(expected)}, got {_type_name(value)} {shorten(value)}")
        return value

    def string(self, name: str, required: bool = False) -> str | None:
        return self.value(name, str, required)

    def choice(self, name: str, allowed: Sequence[str]) -> str | None:
        """A string field that must be one of ``allowed`` when present."""
        value = self.string(name)
        if value is not None and value not in allowed:
            self.fail(name, f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    def tag(self, name: str, value: str | None) -> str | None:
        """``value`` when it is ``None`` or matches :data:`TAG_PATTERN`."""
        if value is not None and not TAG_PATTERN.fullmatch(value):
            self.fail(name, f"a tag is 1 to 64 letters, digits, '_' or '-' (it becomes part of metric names), "
                            f"got {shorten(value)}")
        return value

    def timestamp(self, name: str) -> str | None:
        """An ISO 8601 date or date-time string (``2026-12-04``, ``2026-12-04T10:15:00Z``), kept as written."""
        value = self.string(name)
        if value is not None:
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                self.fail(name, f"must be an ISO 8601 date or date-time such as 2026-12-04T10:15:00Z, got {value!r}")
        return value

    def strings(self, name: str) -> list[str]:
        return self._list(name, str)

    def objects(self, name: str) -> list[dict]:
        return self._list(name, dict)

    def _list(self, name: str, element: type) -> list:
        values = self.value(name, list) or []
        for i, value in enumerate(values):
            if not isinstance(value, element):
                self.fail(f"{name}[{i}]", f"must be {_article(element)}, got {_type_name(value)} {shorten(value)}")
        return values


def _type_name(value: object) -> str:
    return "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _article(expected: type) -> str:
    name = _JSON_TYPE_NAMES[expected]
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def shorten(value: object, limit: int = 60) -> str:
    """``value`` as JSON, cut to ``limit`` characters for an error message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    return text[: limit - 4] + '..."' if isinstance(value, str) else text[: limit - 3] + "..."
