"""An annotation session: the eval set being built and its sidecar queue, saved at every change.

Files (``EVALSET`` is a ``.jsonl`` eval set, created when absent):

- ``EVALSET``: the ragexp eval-set format (docs/evalset-format.md). An entry reaches it once a
  person confirmed it and it is complete: answerable with at least one evidence span of grade >= 1,
  or marked unanswerable; ``added`` is then set to that moment (a draft keeps its own). Spans
  are written as ``{"doc_id", "start", "end", "quote"}`` (the quote is checked at load time: a
  stale span is reported, never moved); "not relevant" verdicts are grade-0 spans, the judged
  negatives of the pool.
- ``<stem>.annotation.json`` (the sidecar): every entry, finished or not (queued questions, skips,
  work in progress, where each came from).

Every eval-set field, in either file and in every row queued, is read and written through the
eval-set schema (:mod:`ragexp.data.evalset_schema`), the loader's own records: what the page
shows and saves, a run can load. A session started with an ``annotator`` records it on each entry
it changes.

Saving: both files are written whole through a temporary file renamed over them (eval set first);
a killed server leaves each file old or new, never half.

A change is a compare-and-set on the entry's fields, decided by content alone (nothing in server
memory, so a restarted server decides the same): the page sends ``changes`` (new field values) and
``before`` (the values it showed when the person made the change). Per field: stored == before, the
change applies; stored == the new value, it is already so (the retry of a save whose reply was
lost, e.g. written just before the server was killed, or another page made the same edit); any
other stored value is a :class:`~ragexp.web.edit_session.Conflict` (HTTP 409: someone else changed that
field in between) and nothing is written. A change that is already so writes nothing.
Before every change the files are read again when their bytes differ from what this process last
read or wrote (another server on the same file, an editor); on (re)load the eval set's items win
over the sidecar's copy of them (an edit by hand is kept). Reading, comparing and writing happen
under :attr:`Session.lock`, an :class:`~ragexp.web.edit_session.EditLock` on ``EVALSET.lock`` shared
with every other process on the same eval set, so two servers never interleave a read and a
write (nothing one of them saved is lost).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ragexp.data import evalset_schema as schema
from ragexp.data.evalset_schema import VERSION_KEY, HeaderRecord, ItemRecord
from ragexp.data.lint import normalise_query
from ragexp.data.loaders.evalset import gold_header
from ragexp.datamodel import ITEM_SOURCES, is_relevant
from ragexp.errors import RagexpInputError
from ragexp.stored import limits
from ragexp.stored.limits import parse_json
from ragexp.web.edit_session import EditLock, atomic_write, compare_and_set

SIDECAR_VERSION = 1
SIDECAR_KEY = "ragexp_annotation"
#: Entry fields the eval set stores (the rest lives in the sidecar only).
ITEM_KEYS = schema.ITEM_FIELDS
#: Entry fields a page may set.
EDITABLE = ("evidence", "gold_answer", "key_facts", "tags", "answerable", "skipped", "confirmed", "reviewed")
#: What an editable field holds when the entry does not set it.
DEFAULTS = {"evidence": [], "gold_answer": "", "key_facts": [], "tags": [], "answerable": True, "skipped": False,
            "confirmed": False, "reviewed": False}


def _bytes_of(path: Path) -> bytes | None:
    """The file's bytes, ``None`` when nothing is there; read like every other input
    (:func:`ragexp.stored.limits.read_bytes`: a regular file, a FIFO or device refused without
    blocking, at most :data:`~ragexp.stored.limits.MAX_BYTES`)."""
    if not os.path.lexists(path):
        return None
    return limits.read_bytes(path)


def _etag_of(*contents: bytes | None) -> str:
    digest = hashlib.sha256()
    for raw in contents:
        digest.update(b"\0absent" if raw is None else raw)
        digest.update(b"\0")
    return "sha256-" + digest.hexdigest()[:32]


def sidecar_path(evalset: Path) -> Path:
    return evalset.with_name(f"{evalset.stem}.annotation.json")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def entry_id(query: str) -> str:
    """A stable id from the question: ``q-`` and 8 hex digits of SHA-1 over its normalised text."""
    return "q-" + hashlib.sha1(normalise_query(query).encode("utf-8")).hexdigest()[:8]


def is_complete(entry: dict) -> bool:
    """Whether the entry belongs in the eval set (see the module docstring)."""
    if not entry.get("confirmed") or entry.get("skipped"):
        return False
    if entry.get("answerable", True) is False:
        return True
    return any(is_relevant(e.get("grade", 1)) for e in entry.get("evidence", []))


def item_record(entry: dict, *, file: Path | None = None, line: int | None = None) -> ItemRecord:
    """The eval-set record of an entry's item fields (:mod:`ragexp.data.evalset_schema`: unknown
    or mistyped values raise :class:`RagexpInputError`)."""
    return schema.item_from_json({key: entry[key] for key in ITEM_KEYS if entry.get(key) is not None},
                                 file=file, line=line)


def as_item(entry: dict) -> dict:
    """The eval-set line of a complete entry: empty fields left out, ``answerable`` only when false."""
    return schema.item_to_json(item_record(entry))


def check_queue_row(row: dict, *, file: Path | str | None = None, line: int | None = None) -> None:
    """:class:`RagexpInputError` when a row to queue (candidates, drafts, failures: ``query`` plus
    eval-set fields, any other key kept as its origin) holds an item field the eval set refuses,
    so the page never shows a value the eval set could not store."""
    query = row.get("query")
    item_id = row.get("id") or (entry_id(query) if isinstance(query, str) else None)
    schema.item_from_json({"id": item_id, **{key: row[key] for key in ITEM_KEYS if key != "id" and row.get(key) is not None}},
                          file=None if file is None else Path(file), line=line)


def _evidence_line(evidence: dict) -> dict:
    line = {key: evidence[key] for key in ("doc_id", "start", "end", "quote", "occurrence") if evidence.get(key) is not None}
    if evidence.get("grade", 1) != 1:
        line["grade"] = evidence["grade"]
    return line


def field_value(entry: dict, key: str):
    """An editable field in a canonical form (default when unset; evidence as the eval set writes
    it, so ``grade: 1`` and no grade compare equal)."""
    value = entry.get(key)
    if value is None:
        value = DEFAULTS[key]
    if key == "evidence":
        return [_evidence_line(e) if isinstance(e, dict) else e for e in value]
    return value


def check_changes(changes: dict) -> None:
    """``ValueError`` naming the field when a page sends something the eval set cannot hold."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValueError(f"fields that cannot be edited: {', '.join(sorted(unknown))}")
    if not isinstance(changes.get("evidence", []), list):
        raise ValueError("evidence: a list of spans")
    for i, e in enumerate(changes.get("evidence", [])):
        ok = (isinstance(e, dict) and isinstance(e.get("doc_id"), str) and type(e.get("grade", 1)) is int
              and e.get("grade", 1) >= 0 and (e.get("start") is None) == (e.get("end") is None)
              and (e.get("quote") is None or isinstance(e["quote"], str))
              and (e.get("start") is None or (type(e["start"]) is int and type(e["end"]) is int and 0 <= e["start"] < e["end"])))
        if not ok:
            raise ValueError(f"evidence[{i}]: needs doc_id, start < end (integers), a string quote and an integer grade >= 0")
        try:
            schema.evidence_from_json(e, prefix=f"evidence[{i}]")
        except RagexpInputError as err:
            raise ValueError(f"{err.field}: {err.message}") from None
    for key in ("tags", "key_facts"):
        if key in changes and not (isinstance(changes[key], list) and all(isinstance(v, str) for v in changes[key])):
            raise ValueError(f"{key}: a list of strings")
    for i, tag in enumerate(changes.get("tags", [])):
        if not schema.TAG_PATTERN.fullmatch(tag):
            raise ValueError(f"tags[{i}]: a tag is 1 to 64 letters, digits, '_' or '-', got {schema.shorten(tag)}")
    for key in ("answerable", "skipped", "confirmed", "reviewed"):
        if key in changes and not isinstance(changes[key], bool):
            raise ValueError(f"{key}: true or false")
    if "gold_answer" in changes and not isinstance(changes["gold_answer"], str):
        raise ValueError("gold_answer: a string")


#: How an annotator's verdict on an adjudicated unit was given (:mod:`ragexp.annotation.adjudication`).
VERDICT_HOW = ("span", "within", "around", "overlap", "document", "unanswerable")


def _is_verdict(verdict) -> bool:
    grade = verdict.get("grade") if isinstance(verdict, dict) else 0.5
    return (isinstance(verdict, dict) and set(verdict) <= {"grade", "how"} and (grade is None or (type(grade) is int and grade >= 0))
            and verdict.get("how") in (None, *VERDICT_HOW))


def _is_pair(value, check) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(check(v) for v in value)


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_adjudication(record) -> bool:
    """Whether a review's ``adjudication`` (each annotator's fields, side by side) has the shape the page reads."""
    return (isinstance(record, dict) and set(record) == {"names", "answerable", "gold_answer", "key_facts", "tags"}
            and _is_pair(record["names"], lambda v: isinstance(v, str)) and _is_pair(record["answerable"], lambda v: isinstance(v, bool))
            and _is_pair(record["gold_answer"], lambda v: isinstance(v, str))
            and _is_pair(record["key_facts"], _strings) and _is_pair(record["tags"], _strings))


def _is_review(review) -> bool:
    """Whether a sidecar entry's ``review`` (units queued by ``--from-run`` or for adjudication) has
    the shape the page reads."""
    units = review.get("units") if isinstance(review, dict) else None
    adjudication = review.get("adjudication") if isinstance(review, dict) else None
    return isinstance(units, list) and all(
        isinstance(u, dict) and isinstance(u.get("unit_id"), str) and isinstance(u.get("doc_id"), str)
        and type(u.get("start")) is int and type(u.get("end")) is int and 0 <= u["start"] <= u["end"]
        and ("verdicts" not in u or _is_pair(u["verdicts"], _is_verdict)) for u in units
    ) and (adjudication is None or _is_adjudication(adjudication))


def _check_fields(entry: dict, *, file: Path, line: int | None = None, field: str | None = None) -> None:
    """:class:`RagexpInputError` when a stored entry's editable fields hold what a page could not send
    (:func:`check_changes`): a file edited by hand is refused at load, not a 500 on the page."""
    try:
        check_changes({key: entry[key] for key in EDITABLE if entry.get(key) is not None})
        item_record(entry)
    except (ValueError, RagexpInputError) as err:
        problem = f"{err.field}: {err.message}" if isinstance(err, RagexpInputError) else str(err)
        raise RagexpInputError(f"{problem}; correct it by hand (ragexp evalset lint names the problem) or move the file "
                               "away", file=file, line=line, field=field) from None


class Session:
    """The entries of one eval set under annotation; every method that changes them saves both files."""

    def __init__(self, evalset: Path, annotator: str | None = None) -> None:
        self.evalset = Path(evalset)
        self.annotator = annotator  # recorded on each entry this session changes
        if self.evalset.suffix.lower() != ".jsonl":
            raise RagexpInputError("annotate writes the JSONL eval-set format; name a .jsonl file (an existing "
                                   "YAML set: ragexp evalset resolve it to JSONL first)", file=self.evalset)
        if not self.evalset.parent.is_dir():
            raise RagexpInputError("the folder to write the eval set into does not exist", file=self.evalset.parent)
        self.sidecar = sidecar_path(self.evalset)
        self.lock = EditLock(self.evalset)
        self.header = HeaderRecord(name=self.evalset.stem)
        self.entries: list[dict] = []
        #: The corpus now (the page's live corpus): each save records in the header what every gold
        #: document's text was (:func:`~ragexp.data.loaders.evalset.gold_header`); ``None``: kept as read.
        self.corpus: Callable[[], Mapping] | None = None
        self._load()  # without the lock (a bad file leaves no lock file); the first change re-reads under it

    # --- reading ----------------------------------------------------------------------------

    def _load(self) -> None:
        evalset_bytes, sidecar_bytes = _bytes_of(self.evalset), _bytes_of(self.sidecar)
        side = self._read_sidecar(sidecar_bytes)
        for index, entry in enumerate(side.get("entries", [])):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not isinstance(entry.get("query"), str):
                raise RagexpInputError("each entry needs a string id and query; move the file away to start a new queue",
                                       file=self.sidecar, field=f"entries[{index}]")
            _check_fields(entry, file=self.sidecar, field=f"entries[{index}]")
            if entry.get("review") is not None and not _is_review(entry["review"]):
                raise RagexpInputError("review: needs units, each with unit_id, doc_id and integer start <= end; move the file "
                                       "away to start a new queue", file=self.sidecar, field=f"entries[{index}]")
        by_id = {entry["id"]: entry for entry in side.get("entries", [])}
        order = [entry["id"] for entry in side.get("entries", [])]
        self.header = HeaderRecord(name=self.evalset.stem)
        for line_no, obj in self._read_evalset(evalset_bytes):
            if VERSION_KEY in obj and "query" not in obj:
                self.header = schema.header_from_json(obj, file=self.evalset, line=line_no)
                continue
            item_id = obj.get("id")
            if not isinstance(item_id, str) or not isinstance(obj.get("query"), str):
                raise RagexpInputError("an eval-set item needs a string id and query", file=self.evalset, line=line_no,
                                       field="id")
            _check_fields(obj, file=self.evalset, line=line_no)
            entry = by_id.get(item_id, {"id": item_id, "origin": {"from": "evalset"}})
            for key in ITEM_KEYS:
                entry.pop(key, None)
            entry.update(schema.item_to_json(schema.item_from_json(obj, file=self.evalset, line=line_no)))  # the file wins
            if "category" in entry:
                entry["tags"] = [*entry.get("tags", []), entry.pop("category")]
            entry["confirmed"], entry["skipped"] = True, False
            if item_id not in by_id:
                order.append(item_id)
            by_id[item_id] = entry
        self.entries = [by_id[i] for i in dict.fromkeys(order)]
        self.disk_etag = _etag_of(evalset_bytes, sidecar_bytes)  # of the bytes read: a write since is seen

    def _read_sidecar(self, raw: bytes | None) -> dict:
        if raw is None:
            return {}
        try:
            data = parse_json(raw.decode("utf-8"), source=self.sidecar)
        except UnicodeDecodeError as err:
            raise RagexpInputError(f"cannot read the annotation queue: {err}; move it away to start a new queue",
                                   file=self.sidecar) from None
        except RagexpInputError as err:
            raise RagexpInputError(f"cannot read the annotation queue: {err.message}; move it away to start a new queue",
                                   file=self.sidecar, line=err.line, field=err.field) from None
        if not isinstance(data, dict) or data.get(SIDECAR_KEY) != SIDECAR_VERSION or not isinstance(data.get("entries"), list):
            raise RagexpInputError(f"not a ragexp annotation queue (expected {SIDECAR_KEY}: {SIDECAR_VERSION})",
                                   file=self.sidecar, field=SIDECAR_KEY)
        return data

    def _read_evalset(self, raw: bytes | None) -> Iterable[tuple[int, dict]]:
        if raw is None:
            return []
        rows = []
        text = limits.decode_utf8(raw, self.evalset)
        limits.check_json_depth(text, source=self.evalset, max_depth=sys.maxsize)  # values in all, as evalset lint
        for number, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 in a string is no line break
            if not line.strip():
                continue
            obj = parse_json(line, source=self.evalset, line=number)
            if not isinstance(obj, dict):
                raise RagexpInputError("each line must be a JSON object", file=self.evalset, line=number)
            rows.append((number, obj))
        return rows

    # --- state ------------------------------------------------------------------------------

    def etag(self) -> str:
        """A digest of both files' bytes as they are now."""
        return _etag_of(_bytes_of(self.evalset), _bytes_of(self.sidecar))

    def entry(self, item_id: str) -> dict | None:
        return next((entry for entry in self.entries if entry["id"] == item_id), None)

    def items(self) -> list[dict]:
        return [as_item(entry) for entry in self.entries if is_complete(entry)]

    # --- changing ---------------------------------------------------------------------------

    def reload_if_changed(self) -> None:
        """Read the files again when another writer changed them since this process read or wrote them."""
        with self.lock:
            if self.etag() != self.disk_etag:
                self._load()

    def compare(self, item_id: str, changes: dict, before: dict) -> dict:
        """The fields of ``changes`` still to write (see the module docstring); :class:`Conflict`
        naming the fields someone else changed; ``ValueError`` when ``before`` lacks a changed field."""
        entry = self.entry(item_id)
        missing = sorted(set(changes) - set(before))
        if missing:
            raise ValueError(f"before: the values the page showed are needed for {', '.join(missing)}")
        stored = {key: field_value(entry, key) for key in changes}
        return compare_and_set(self.evalset, item_id, stored, changes, before,
                               canonical=lambda key, value: field_value({key: value}, key))

    def queue(self, rows: Iterable[dict], origin: str, confirmed: bool = False) -> int:
        """Append rows (candidates, drafts, failures: ``query`` plus optional eval-set fields) whose
        question is not an entry yet; returns how many were added. Saves when any was. A row without
        ``answerable`` leaves it undecided (read as answerable). ``confirmed``: the rows are
        settled already (items two annotators gave alike), and complete ones join the eval set."""
        with self.lock:
            self.reload_if_changed()
            known = {normalise_query(entry["query"]) for entry in self.entries}
            added = 0
            rows = list(rows)
            for row in rows:
                check_queue_row(row, file=origin)  # all before any is queued
            for row in rows:
                query = str(row.get("query", "")).strip()
                if not query or normalise_query(query) in known:
                    continue
                known.add(normalise_query(query))
                # a row that says its source is unknown (null) keeps it unknown; one that says nothing was typed here
                source = row["source"] if row.get("source") in ITEM_SOURCES else None if "source" in row else "hand"
                entry = {"id": row.get("id") or entry_id(query), "query": query, "source": source,
                         "added": row.get("added"), "evidence": list(row.get("evidence", [])),
                         "tags": list(row.get("tags", [])), "key_facts": list(row.get("key_facts", [])),
                         "gold_answer": row.get("gold_answer") or "", "answerable": row.get("answerable"),
                         "confirmed": confirmed, "skipped": False,
                         "origin": {"from": origin, **{k: v for k, v in row.items() if k not in ITEM_KEYS}}}
                while self.entry(entry["id"]) is not None:  # two questions with the same hash prefix
                    entry["id"] += "x"
                if confirmed and entry["added"] is None and is_complete(entry):
                    entry["added"] = now()
                self.entries.append(entry)
                added += 1
            if added:
                self.save()
            return added

    def attach_review(self, item_id: str, units: list[dict], reason: str, adjudication: dict | None = None) -> bool:
        """Queue units for judging on entry ``item_id`` (``units``: ``unit_id``, ``doc_id``, ``start``,
        ``end``, and each annotator's ``verdicts`` when adjudicating, with ``adjudication`` their
        fields side by side); reopens the entry. Returns whether the entry exists."""
        with self.lock:
            entry = self.entry(item_id)
            if entry is None:
                return False
            entry["review"] = {"reason": reason, "units": units} | ({"adjudication": adjudication} if adjudication else {})
            entry["reviewed"] = False
            return True

    def update(self, item_id: str, changes: dict, before: dict) -> dict:
        """Apply a page's changes to one entry and save, or nothing when they are already so
        (see the module docstring)."""
        with self.lock:
            self.reload_if_changed()
            if self.entry(item_id) is None:
                raise KeyError(item_id)
            check_changes(changes)
            to_write = self.compare(item_id, changes, before)
            entry = self.entry(item_id)
            if not to_write:
                return entry
            entry.update(to_write)
            if self.annotator is not None:
                entry["annotator"] = self.annotator
            if entry.get("added") is None and is_complete(entry):
                entry["added"] = now()  # when it joined the eval set
            self.save()
            return entry

    def delete(self, item_id: str) -> bool:
        """Remove a queued question the eval set does not hold (a junk question typed by mistake);
        ``ValueError`` for one it holds (its evidence would vanish from the eval set). Returns
        whether it was there: deleting it again (a retried request) writes nothing."""
        with self.lock:
            self.reload_if_changed()
            entry = self.entry(item_id)
            if entry is None:
                return False
            if is_complete(entry):
                raise ValueError(f"{item_id} is in the eval set; remove its evidence first (or skip it)")
            self.entries.remove(entry)
            self.save()
            return True

    def add(self, query: str) -> dict:
        """A question typed on the page (``source: hand``); the existing entry when it is one already
        (so a retried add adds nothing)."""
        with self.lock:
            self.queue([{"query": query, "source": "hand"}], "page")
            return next(e for e in self.entries if normalise_query(e["query"]) == normalise_query(query))

    def save(self) -> None:
        with self.lock:
            items = self.items()
            if self.corpus is not None:
                self.header = gold_header(self.header, [schema.item_from_json(i) for i in items], self.corpus())
            atomic_write(self.evalset, "".join(schema.dumps_line(obj) + "\n"
                                               for obj in [schema.header_to_json(self.header), *items]))
            side = {SIDECAR_KEY: SIDECAR_VERSION, "evalset": self.evalset.name, "entries": self.entries}
            atomic_write(self.sidecar, json.dumps(side, ensure_ascii=False, indent=1) + "\n")
            self.disk_etag = self.etag()
