"""Bounds applied before any stored or handed file is parsed (the first step of the one gate).

- :func:`read_bytes` reads a path only when it names a regular file (not a folder, device, FIFO or
  socket: ``/dev/zero`` would read until memory runs out, a FIFO would block forever) of at most
  ``max_bytes`` bytes; the check is made on the opened file (``fstat``), so a path swapped after a
  first look cannot slip past it, and the open never blocks. :func:`check_file` makes the same
  checks without reading (a config's path fields, checked before any work).
- :func:`read_text` adds strict UTF-8 decoding, naming the line of the first bad byte.
- :func:`parse_json` refuses nesting deeper than ``max_depth``, a key twice in one object (JSON
  would keep the last silently), ``NaN``/``Infinity`` and integers beyond a float's range
  (``10**400`` would overflow later, far from the file).
- :func:`parse_yaml` is YAML's safe loader without aliases (a 500-byte alias bomb expands to
  gigabytes) and with the same depth bound, duplicate-key and number checks.

Every refusal is a :class:`~ragexp.errors.RagexpInputError`: one line naming the file and, where
known, the line and field.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from ragexp.errors import RagexpInputError

#: Default bounds; a reader passes its own when its format needs other ones.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
#: Integers with more digits than this are refused before they are built (a float holds ~1.8e308),
#: and parsed integers beyond :data:`MAX_ABS_INT` after.
MAX_INT_DIGITS = 309
MAX_ABS_INT = int(1.7976931348623157e308)


def _open_regular(path: Path, max_bytes: int) -> int:
    """A descriptor on ``path`` once ``fstat`` shows a regular file of at most ``max_bytes`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RagexpInputError("no such file", file=path) from None
    except IsADirectoryError:
        raise RagexpInputError("is a folder, not a file", file=path) from None
    except OSError as err:
        raise RagexpInputError(f"cannot open ({err.strerror})", file=path) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise RagexpInputError("is a folder, not a file", file=path)
        if not stat.S_ISREG(info.st_mode):
            raise RagexpInputError("is not a regular file (a device, FIFO or socket); give a file", file=path)
        if info.st_size > max_bytes:
            raise RagexpInputError(f"is {info.st_size:,} bytes, more than the {max_bytes:,} allowed here", file=path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> None:
    """Refuse ``path`` unless it names a regular file of at most ``max_bytes`` bytes (nothing is read)."""
    os.close(_open_regular(Path(path), max_bytes))


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bytes:
    """The content of ``path`` if it is a regular file of at most ``max_bytes`` bytes."""
    path = Path(path)
    fd = _open_regular(path, max_bytes)
    try:
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since fstat
        raise RagexpInputError(f"is more than the {max_bytes:,} bytes allowed here", file=path)
    return data


def decode_utf8(data: bytes, path: str | os.PathLike[str]) -> str:
    """``data`` as strict UTF-8, byte for byte (no newline translation); a bad byte is named with its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise RagexpInputError(f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); re-save the "
                               "file as UTF-8", file=path, line=line) from None


def read_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> str:
    """:func:`read_bytes` decoded by :func:`decode_utf8`."""
    return decode_utf8(read_bytes(path, max_bytes=max_bytes), path)


class _Refused(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _Refused("the key appears twice in one object (the parser would keep the last silently); keep one",
                       field=str(twice))
    return obj


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"a number with {len(text.lstrip('-'))} digits is out of range")
    return int(text)


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not a number this file may hold")


#: A JSON string, or an unterminated one up to the end of the text. Every backslash takes the next
#: character (or the end) with it, so a match never fails once started: one pass, no backtracking
#: (``"\"\"\"…`` with no closing quote was quadratic with a pattern that had to end in ``"``).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _bracket_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON ``text`` outside strings: strings and every other
    character are removed (in C, by two regular expressions), then the brackets left are summed
    up (a linear pre-scan, so a 2,000-deep line is refused before the parser recurses into it)."""
    brackets = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets), initial=0))


def check_json_depth(text: str, *, source: str | os.PathLike[str] | None = None, line: int | None = None,
                     max_depth: int = MAX_DEPTH) -> None:
    """Refuse JSON ``text`` nested deeper than ``max_depth`` before any parser recurses into it
    (for readers that keep JSON's other liberties, such as query logs). A text with at most
    ``max_depth`` opening brackets cannot nest deeper and is not scanned (the count runs in C:
    SciFact's 5,183 corpus lines took 0.27 s to scan, 0.006 s to count)."""
    if text.count("[") + text.count("{") > max_depth and _bracket_depth(text) > max_depth:
        raise RagexpInputError(f"nested more than {max_depth} levels deep", file=source, line=line)


def parse_json(text: str, *, source: str | os.PathLike[str] | None = None, line: int | None = None,
               max_depth: int = MAX_DEPTH, allow_nan: bool = False) -> Any:
    """``text`` as JSON within the module's bounds; errors name ``source`` and ``line``.
    ``allow_nan`` admits ``NaN`` (a format that stores an undefined mean as NaN, the results file),
    never ``Infinity``."""
    check_json_depth(text, source=source, line=line, max_depth=max_depth)
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int,
                           parse_constant=_nan_or_refused if allow_nan else _no_constant)
    except _Refused as err:
        raise RagexpInputError(err.message, file=source, line=line, field=err.field) from None
    except json.JSONDecodeError as err:
        where = line if line is not None else err.lineno
        raise RagexpInputError(f"malformed JSON at column {err.colno}: {err.msg}", file=source, line=where) from None
    _check_numbers(value, source, line, allow_nan=allow_nan)
    return value


def _nan_or_refused(name: str) -> float:
    return math.nan if name == "NaN" else _no_constant(name)


def _check_numbers(value: Any, source: str | os.PathLike[str] | None, line: int | None, *,
                   allow_nan: bool = False) -> None:
    """Every number finite (or NaN, when allowed) and within a float's range (a huge integer
    overflows later, far from the file)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if (isinstance(node, float) and not math.isfinite(node) and not (allow_nan and math.isnan(node))) or (
                isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_ABS_INT):
            raise RagexpInputError("a number is out of range (beyond a float's range)", file=source, line=line)
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


class _BoundedLoader(yaml.SafeLoader):
    """YAML's safe loader refusing aliases, deep nesting and duplicate keys."""

    max_depth = MAX_DEPTH

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"YAML aliases (*{event.anchor}) are not allowed in this file (line "
                           f"{event.start_mark.line + 1}); write the values out")
        if self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            self._depth += 1
            if self._depth > self.max_depth:
                raise _Refused(f"nested more than {self.max_depth} levels deep (line {self.peek_event().start_mark.line + 1})")
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise _Refused(f"the key appears twice in one mapping (line {key_node.start_mark.line + 1}); keep one",
                               field=str(key))
            seen.add(key) if isinstance(key, (str, int, float, bool)) else None
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, *, source: str | os.PathLike[str] | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """One YAML document within the module's bounds (no aliases, no tags beyond YAML's safe ones)."""
    loader = _BoundedLoader(text)
    loader.max_depth = max_depth
    try:
        value = loader.get_single_data()
    except _Refused as err:
        raise RagexpInputError(err.message, file=source, field=err.field) from None
    except yaml.YAMLError as err:
        raise RagexpInputError(f"not valid YAML ({str(err).splitlines()[0]})", file=source) from None
    finally:
        loader.dispose()
    _check_numbers(value, source, None)
    return value
