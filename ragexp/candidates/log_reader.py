"""Streaming a query log: one query per line (plain text), a JSONL field, or a CSV column; gzip too.

:func:`read_log` yields ``(line_number, query)`` for every non-blank query of the file, reading it
in pieces (a line at a time, never the whole file), so memory does not grow with the log's length.

- Format: ``.jsonl``/``.ndjson`` -> JSON Lines, ``.csv`` -> CSV, ``.tsv`` -> tab-separated, anything
  else -> plain text; a trailing ``.gz`` is looked through. ``fmt`` overrides the suffix.
- ``field`` names the JSON key (dots walk into nested objects: ``request.q``) or CSV column that
  holds the query (default ``query``); plain text takes the whole line.
- gzip is recognised by its magic bytes, so a compressed file without ``.gz`` is read too. What it
  decodes to is bounded: more than :data:`MAX_GZIP_RATIO` times the compressed bytes read so far
  (plus :data:`GZIP_SLACK_BYTES`) is refused as a gzip bomb while it is read, before minutes of
  decoding (text logs compress 3-20x; a bomb of one repeated byte ~1000x).
- A line longer than :data:`MAX_LINE_CHARS` is not a query: it is skipped and counted
  (:attr:`LogStats.too_long`), read in pieces so it never sits in memory whole.

Bad input raises :class:`RagexpInputError` naming the file (and line): a missing file, a binary file
(a NUL byte, or more than 10 % control bytes in its first 8 KiB), text that is not UTF-8, an unreadable gzip stream, malformed JSON, a missing field, a
field that is not a string, a file with no query at all.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.stored.limits import check_json_depth

FORMATS = ("text", "jsonl", "csv", "tsv")
DEFAULT_FIELD = "query"
MAX_LINE_CHARS = 4096
_GZIP_MAGIC = b"\x1f\x8b"
MAX_GZIP_RATIO = 200
GZIP_SLACK_BYTES = 16 * 1024 * 1024
_SNIFF_BYTES = 8192
_SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


@dataclass
class LogStats:
    """What reading one log counted: lines read, lines skipped as too long, lines without a query."""

    lines: int = 0
    too_long: int = 0
    blank: int = 0


def log_format(path: Path, fmt: str | None = None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise RagexpInputError(f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}", field="format")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return _SUFFIX_FORMATS.get(suffixes[-1] if suffixes else "", "text")


def _open_text(path: Path) -> io.TextIOBase:
    try:
        raw = path.open("rb")
    except FileNotFoundError:
        raise RagexpInputError("no such log file", file=path) from None
    except IsADirectoryError:
        raise RagexpInputError("is a folder; give the log files themselves", file=path) from None
    except OSError as err:
        raise RagexpInputError(f"cannot read the log ({err.strerror})", file=path) from None
    stream = raw
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        stream = io.BufferedReader(_BoundedGzip(raw, path))
    try:
        head = stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        stream.close()
        raise RagexpInputError(f"not a readable gzip file ({err or 'truncated'})", file=path) from None
    if _is_binary(head):
        stream.close()
        raise RagexpInputError("a binary file, not a text query log (one query a line, JSONL or CSV; gzip is fine)", file=path)
    return io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline="")


class _BoundedGzip(io.RawIOBase):
    """The decompressed bytes of a gzip file, refused once they pass :data:`MAX_GZIP_RATIO` times
    the compressed bytes read (module docstring); closing it closes the file."""

    def __init__(self, raw: io.BufferedReader, path: Path) -> None:
        self._raw, self._path, self._decoded = raw, path, 0
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - io's signature
        data = self._gzip.read1(len(buffer))  # what one step decodes: a damaged end is met where the lines are
        n = len(data)
        buffer[:n] = data
        self._decoded += n
        if self._decoded > MAX_GZIP_RATIO * self._raw.tell() + GZIP_SLACK_BYTES:
            raise RagexpInputError(f"decompresses to more than {MAX_GZIP_RATIO} times its size ({self._decoded:,} bytes "
                                   f"from {self._raw.tell():,}): refused as a gzip bomb", file=self._path)
        return n

    def close(self) -> None:
        if not self.closed:
            self._gzip.close()
            self._raw.close()
        super().close()


def _is_binary(head: bytes) -> bool:
    """NUL bytes, or more than 10 % control bytes other than tab, line ends and form feed."""
    if b"\x00" in head:
        return True
    controls = sum(1 for byte in head if byte < 32 and byte not in (9, 10, 12, 13))
    return controls > 0.1 * len(head)


def _lines(path: Path, stats: LogStats) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` with its line end; too-long lines skipped in pieces."""
    with _open_text(path) as text:
        number = 0
        while True:
            try:
                line = text.readline(MAX_LINE_CHARS + 1)
            except UnicodeDecodeError as err:
                raise RagexpInputError(
                    f"not valid UTF-8 (byte 0x{err.object[err.start]:02x}); a query log must be UTF-8 text: re-save it as UTF-8",
                    file=path, line=number + 1,
                ) from None
            except (gzip.BadGzipFile, EOFError, zlib.error) as err:
                raise RagexpInputError(f"not a readable gzip file ({err or 'truncated'})", file=path, line=number + 1) from None
            if not line:
                return
            number += 1
            stats.lines += 1
            if "\x00" in line:
                raise RagexpInputError("a binary file (NUL bytes), not a text query log", file=path, line=number)
            if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                stats.too_long += 1
                while line and not line.endswith("\n"):
                    line = text.readline(MAX_LINE_CHARS)
                continue
            yield number, line


def _field_value(obj: dict, field: str) -> object:
    value: object = obj
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


def _jsonl_queries(path: Path, field: str, stats: LogStats) -> Iterator[tuple[int, str]]:
    for number, line in _lines(path, stats):
        if not line.strip():
            stats.blank += 1
            continue
        check_json_depth(line, source=path, line=number)  # 2,000 levels would end in a RecursionError
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise RagexpInputError(f"malformed JSON at column {err.colno}: {err.msg}", file=path, line=number) from None
        if not isinstance(obj, dict):
            raise RagexpInputError(f"expected a JSON object per line, got {type(obj).__name__}", file=path, line=number)
        value = _field_value(obj, field)
        if value is _MISSING:
            keys = ", ".join(list(obj)[:10]) or "none"
            raise RagexpInputError(f"no such field in this line (its keys: {keys}); name the query's field with --field", file=path, line=number, field=field)
        if value is None:
            stats.blank += 1
            continue
        if not isinstance(value, str):
            raise RagexpInputError(f"must be a string, got {type(value).__name__}", file=path, line=number, field=field)
        yield number, value


def _csv_queries(path: Path, field: str, delimiter: str, stats: LogStats) -> Iterator[tuple[int, str]]:
    lines = _lines(path, stats)
    numbers: list[int] = []

    def physical() -> Iterator[str]:
        for number, line in lines:
            numbers.append(number)
            yield line

    reader = csv.reader(physical(), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        numbers.clear()
        if header is None:
            return
        if field not in header:
            raise RagexpInputError(f"no such column (columns: {', '.join(header[:10])}); name the query's column with --field", file=path, line=1, field=field)
        column = header.index(field)
        for row in reader:
            start = numbers[0]
            numbers.clear()
            if not row:
                stats.blank += 1
                continue
            if column >= len(row):
                raise RagexpInputError(f"the row has {len(row)} columns, the header {len(header)}", file=path, line=start, field=field)
            yield start, row[column]
    except csv.Error as err:
        raise RagexpInputError(f"malformed CSV: {err}", file=path, line=numbers[-1] if numbers else None) from None


def _text_queries(path: Path, stats: LogStats) -> Iterator[tuple[int, str]]:
    for number, line in _lines(path, stats):
        if not line.strip():
            stats.blank += 1
            continue
        yield number, line.rstrip("\r\n")


def read_log(path: Path, *, field: str | None = None, fmt: str | None = None, stats: LogStats | None = None) -> Iterator[tuple[int, str]]:
    """``(line_number, query)`` for each query of the log at ``path`` (see the module docstring)."""
    stats = stats if stats is not None else LogStats()
    kind = log_format(path, fmt)
    if kind == "text":
        if field is not None:
            raise RagexpInputError("--field applies to JSONL and CSV logs; this one is read as plain text (one query a line); give --format", file=path, field="field")
        queries = _text_queries(path, stats)
    elif kind == "jsonl":
        queries = _jsonl_queries(path, field or DEFAULT_FIELD, stats)
    else:
        queries = _csv_queries(path, field or DEFAULT_FIELD, "," if kind == "csv" else "\t", stats)
    found, too_long_before = False, stats.too_long
    for number, query in queries:
        found = True
        yield number, query
    if not found and stats.too_long > too_long_before:
        raise RagexpInputError(f"no query in it: {stats.too_long - too_long_before:,} line(s) longer than {MAX_LINE_CHARS:,} "
                               "characters skipped (not queries) and no other line holds one; a log holds one query a line", file=path)
    if not found:
        raise RagexpInputError("empty log: no query in it; a log holds one query a line, or JSONL/CSV records with the query in --field", file=path)
