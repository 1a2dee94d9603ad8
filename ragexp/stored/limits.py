"""Bounds applied before any stored or handed file is parsed (the first step of the one gate).

- :func:`read_bytes` reads a path only when it names a regular file (not a folder, device, FIFO or
  socket: ``/dev/zero`` would read until memory runs out, a FIFO would block forever) of at most
  ``max_bytes`` bytes; the check is made on the opened file (``fstat``), so a path swapped after a
  first look cannot slip past it, and the open never blocks. :func:`check_file` makes the same
  checks without reading (a config's path fields, checked before any work).
- :func:`read_text` adds strict UTF-8 decoding, naming the line of the first bad byte.
- :func:`parse_json` refuses nesting deeper than ``max_depth`` and more than ``max_values``
  values (counted before parsing, by a linear scan in C: a file of empty objects ``[{},{},...]``
  would otherwise build tens of millions of dicts from a file within its byte cap), a key twice
  in one object (JSON would keep the last silently), ``NaN``/``Infinity``, integers beyond a
  float's range (``10**400`` would overflow later, far from the file) and a string holding a lone
  surrogate (``"\\ud800"``: no UTF-8 output can hold it).
- :func:`iter_lines` splits a file's bytes on ``\\n`` and decodes each line on its own;
  :class:`JsonLinesBudget` bounds what all the JSON lines of one file produce together (values
  and bytes of Python objects, measured with :func:`produced_size` as each line is parsed).
- :func:`parse_yaml` is YAML's safe loader without aliases (a 500-byte alias bomb expands to
  gigabytes), with the same depth bound, at most ``max_nodes`` nodes (composed one by one, so the
  refusal comes before the tree grows), duplicate-key and number checks, and a closed set of
  types: strings, integers (at most :data:`MAX_INT_DIGITS` digits, refused before they are
  built), floats, booleans, null, lists and mappings. A date is read as the text it is (YAML 1.1's
  timestamps, ``2024-13-45`` included, are not resolved), and the tags that build other types
  (``!!binary``, ``!!timestamp``, ``!!set``, ``!!omap``, ``!!pairs``) are refused.

Every bound is a documented constant here or in the reader that passes its own (the table of
hostile files and what they cost is in docs/scale.md, measured by
``benchmarks/bench_hostile_files.py``).

Every refusal is a :class:`~ragexp.errors.RagexpInputError`: one line naming the file and, where
known, the line and field.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ragexp.errors import RagexpInputError

#: Default bounds; a reader passes its own when its format needs other ones.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
#: JSON values one parse may build (a value costs 24-200 bytes in Python: 2M values stay below ~0.4 GB).
MAX_JSON_VALUES = 2_000_000
#: YAML nodes one parse may compose (a node costs ~0.5 KB while composed: 200,000 stay below ~0.1 GB).
MAX_YAML_NODES = 200_000
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
        with os.fdopen(os.dup(fd), "rb") as handle:  # a read of n bytes allocates n: ask for the file's size
            size = min(max_bytes, os.fstat(fd).st_size)
            data = handle.read(size + 1)
            if len(data) > size:  # grew since fstat: read on, up to one byte past the bound
                data += handle.read(max_bytes + 1 - len(data))
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since fstat
        raise RagexpInputError(f"is more than the {max_bytes:,} bytes allowed here", file=path)
    return data


def file_sha256(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> str:
    """The SHA-256 (hex) of what :func:`read_bytes` reads from ``path``: how a lineage record names a file."""
    return hashlib.sha256(read_bytes(path, max_bytes=max_bytes)).hexdigest()


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
#: (``"\\"\\"\\"…`` with no closing quote was quadratic with a pattern that had to end in ``"``).
_JSON_STRING = r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)'
#: A string, or a run of characters that are neither a bracket, a comma nor a quote: what is left
#: when every match is removed is JSON's structure (``[]{},``), one character per separator.
_NOT_STRUCTURE = re.compile(_JSON_STRING + r'|[^\[\]{},"]+', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


#: Characters of JSON text scanned at once (ended at a line end): a valid JSON string never holds a
#: raw line break, so line-aligned pieces have the structure of the whole, and the scan's memory
#: is bounded by the piece, not the file (results files and JSONL hold one record per line).
_SCAN_CHARS = 1 << 20


def _structures(text: str) -> Iterator[str]:
    """The brackets and commas of JSON ``text`` outside strings, in order, one line-aligned piece at
    a time (each in C, one pass)."""
    start = 0
    while start < len(text):
        end = text.find("\n", min(start + _SCAN_CHARS, len(text)))
        end = len(text) if end < 0 else end + 1
        yield _NOT_STRUCTURE.sub("", text[start:end])
        start = end


def _structure(text: str) -> str:
    """All of :func:`_structures` (for short texts and tests)."""
    return "".join(_structures(text))


def _bracket_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON ``text`` outside strings."""
    return _structure_depth(_structures(text))


def _structure_depth(structures: Iterable[str]) -> int:
    """The deepest nesting of :func:`_structures`' output: its commas are removed too (in C), then
    the brackets left are summed up, piece by piece (a linear pre-scan, so a 2,000-deep line is
    refused before the parser recurses into it)."""
    depth = deepest = 0
    for structure in structures:
        brackets = _NOT_A_BRACKET.sub("", structure)
        steps = list(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets), initial=depth))
        depth, deepest = steps[-1], max(deepest, max(steps))
    return deepest


def _value_count_bound(text: str) -> int:
    """At least the number of JSON values in ``text``: one more than its separators and opening
    brackets (a value is the first of its container or follows a comma; keys follow commas too)."""
    return text.count(",") + text.count("[") + text.count("{") + 1


def check_json_depth(text: str, *, source: str | os.PathLike[str] | None = None, line: int | None = None,
                     max_depth: int = MAX_DEPTH, max_values: int = MAX_JSON_VALUES) -> None:
    """Refuse JSON ``text`` nested deeper than ``max_depth`` or holding more than ``max_values``
    values, before any parser builds or recurses into it (for readers that keep JSON's other
    liberties, such as query logs). The counts run in C: a text with at most ``max_depth``
    opening brackets cannot nest deeper and is not scanned (SciFact's 5,183 corpus lines took
    0.27 s to scan, 0.006 s to count); separators and brackets inside strings are only removed
    when the plain count is over ``max_values``."""
    if _value_count_bound(text) > max_values:
        values = 1 + sum(_value_count_bound(structure) - 1 for structure in _structures(text))
        if values > max_values:
            raise RagexpInputError(f"holds about {values:,} JSON values, more than the {max_values:,} allowed here "
                                   "(refused before parsing)", file=source, line=line)
    if text.count("[") + text.count("{") > max_depth and _structure_depth(_structures(text)) > max_depth:
        raise RagexpInputError(f"nested more than {max_depth} levels deep", file=source, line=line)


def parse_json(text: str, *, source: str | os.PathLike[str] | None = None, line: int | None = None,
               max_depth: int = MAX_DEPTH, max_values: int = MAX_JSON_VALUES, allow_nan: bool = False) -> Any:
    """``text`` as JSON within the module's bounds; errors name ``source`` and ``line``.
    ``allow_nan`` admits ``NaN`` (a format that stores an undefined mean as NaN, the results file),
    never ``Infinity``."""
    check_json_depth(text, source=source, line=line, max_depth=max_depth, max_values=max_values)
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int,
                           parse_constant=_nan_or_refused if allow_nan else _no_constant)
    except _Refused as err:
        raise RagexpInputError(err.message, file=source, line=line, field=err.field) from None
    except json.JSONDecodeError as err:
        where = line if line is not None else err.lineno
        raise RagexpInputError(f"malformed JSON at column {err.colno}: {err.msg}", file=source, line=where) from None
    _check_numbers(value, source, line, allow_nan=allow_nan)
    if _SURROGATE_ESCAPE.search(text):
        _check_no_lone_surrogate(value, source, line)
    return value


#: A JSON escape of a UTF-16 surrogate (``\\ud800``-``\\udfff``): the only way a lone one gets into
#: a parsed string (strict UTF-8 text holds none).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_no_lone_surrogate(value: Any, source: str | os.PathLike[str] | None, line: int | None) -> None:
    """Refuse a string holding half of a surrogate pair (``"\\ud800"`` alone): no UTF-8 file,
    database or terminal can hold it, so it would fail far from the file, after work."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str) and _LONE_SURROGATE.search(node):
            raise RagexpInputError("a string holds half of a UTF-16 surrogate pair (an escape like \\ud800 alone), "
                                   "which is no character; fix the text", file=source, line=line)
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


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


def iter_lines(data: bytes, source: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """Every line of ``data`` (split on ``\\n`` only: JSON strings may hold U+2028) with its 1-based
    number, each decoded as strict UTF-8 on its own (a file is never held as one string: a single
    character outside Latin-1 would make Python store the whole text at 4 bytes per character)."""
    start, number = 0, 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        try:
            yield number, data[start:end].decode("utf-8")
        except UnicodeDecodeError as err:
            raise RagexpInputError(f"not valid UTF-8 (byte 0x{data[start + err.start]:02x} at offset {start + err.start}); "
                                   "re-save the file as UTF-8", file=source, line=number) from None
        start = end + 1


def produced_size(value: Any) -> tuple[int, int]:
    """The values a parse built (containers, keys and scalars) and the bytes Python holds for them
    (``sys.getsizeof`` of each, summed: what parsing produced, measured, not estimated from the text)."""
    count, size, stack = 0, 0, [value]
    while stack:
        node = stack.pop()
        count += 1
        size += sys.getsizeof(node)
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count, size


class JsonLinesBudget:
    """Bounds on what the JSON lines of one file produce together (a line's own bounds are
    :func:`parse_json`'s): at most ``max_values`` values and ``max_bytes`` bytes of Python objects
    in all, measured by :func:`produced_size` as each line is parsed, so the refusal comes at most
    one line past the bound (a line is itself within ``max_values``)."""

    def __init__(self, source: str | os.PathLike[str], *, max_values: int, max_bytes: int) -> None:
        self.source, self.max_values, self.max_bytes = source, max_values, max_bytes
        self.values = self.bytes = 0

    def parse(self, line: str, number: int, *, max_depth: int = MAX_DEPTH) -> Any:
        """``line`` parsed by :func:`parse_json` and added to the totals; refused once past them."""
        value = parse_json(line, source=self.source, line=number, max_depth=max_depth, max_values=self.max_values)
        count, size = produced_size(value)
        self.values, self.bytes = self.values + count, self.bytes + size
        if self.values > self.max_values or self.bytes > self.max_bytes:
            raise RagexpInputError(f"its lines up to this one parse into {self.values:,} JSON values taking "
                                   f"{self.bytes / 2**20:,.0f} MiB, more than the {self.max_values:,} values and "
                                   f"{self.max_bytes // 2**20:,} MiB allowed in all here", file=self.source, line=number)
        return value


_TIMESTAMP = "tag:yaml.org,2002:timestamp"
#: Tags of YAML's safe schema that build types outside the closed set (module docstring).
_REFUSED_TAGS = {_TIMESTAMP: "a timestamp", "tag:yaml.org,2002:binary": "binary data",
                 "tag:yaml.org,2002:set": "a set", "tag:yaml.org,2002:omap": "an ordered map",
                 "tag:yaml.org,2002:pairs": "a list of pairs"}
#: A YAML number with more characters than this is refused before it is built (sexagesimal and
#: ``_``-grouped spellings included; Python refuses int() of more than 4,300 digits with an error).
MAX_NUMBER_CHARS = MAX_INT_DIGITS + 40


class _BoundedLoader(yaml.SafeLoader):
    """YAML's safe loader refusing aliases, deep nesting, too many nodes, duplicate keys, huge
    numbers and the types outside the closed set."""

    max_depth = MAX_DEPTH
    max_nodes = MAX_YAML_NODES
    #: YAML 1.1's implicit types without timestamps: ``2024-01-01`` stays the text it is.
    yaml_implicit_resolvers = {first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"YAML aliases (*{event.anchor}) are not allowed in this file (line "
                           f"{event.start_mark.line + 1}); write the values out")
        self._nodes += 1
        if self._nodes > self.max_nodes:
            raise _Refused(f"more than {self.max_nodes:,} YAML nodes (line {self.peek_event().start_mark.line + 1}): "
                           "refused before the rest is read")
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

    def construct_bounded_number(self, node):  # noqa: ANN001 - PyYAML's signature
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _Refused(f"a number of {len(node.value):,} characters is out of range (line {node.start_mark.line + 1})")
        try:
            if node.tag.endswith(":int"):
                return super().construct_yaml_int(node)
            return super().construct_yaml_float(node)
        except ValueError:  # an explicit !!int or !!float of text that is no number
            raise _Refused(f"{node.value!r} is not a number (line {node.start_mark.line + 1})") from None

    def construct_refused(self, node):  # noqa: ANN001 - PyYAML's signature
        raise _Refused(f"{_REFUSED_TAGS[node.tag]} (!!{node.tag.rsplit(':', 1)[-1]}, line {node.start_mark.line + 1}) is "
                       "not a value this file may hold; write it as text")


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_bounded_number)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_bounded_number)
for _tag in _REFUSED_TAGS:
    _BoundedLoader.add_constructor(_tag, _BoundedLoader.construct_refused)


def yaml_loader(text: str) -> yaml.SafeLoader:
    """A loader of :func:`parse_yaml`'s closed set of types (no timestamps, the same bounds), for a
    reader that walks the composed nodes itself (to name lines); dispose of it after use."""
    return _BoundedLoader(text)


def parse_yaml(text: str, *, source: str | os.PathLike[str] | None = None, max_depth: int = MAX_DEPTH,
               max_nodes: int = MAX_YAML_NODES) -> Any:
    """One YAML document within the module's bounds (no aliases; the closed set of types)."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # its reader already refuses control characters
        loader.max_depth, loader.max_nodes = max_depth, max_nodes
        value = loader.get_single_data()
    except _Refused as err:
        raise RagexpInputError(err.message, file=source, field=err.field) from None
    except yaml.YAMLError as err:
        raise RagexpInputError(f"not valid YAML ({str(err).splitlines()[0]})", file=source) from None
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as err:  # PyYAML's constructors on an
        first = str(err).splitlines()[0][:200] if str(err) else ""  # explicit tag of text they cannot build (!!bool maybe)
        raise RagexpInputError(f"a YAML value that cannot be built ({type(err).__name__} {first})", file=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    _check_numbers(value, source, None)
    if "\\u" in text or "\\U" in text:  # YAML's double-quoted escapes are the only way to a lone surrogate
        _check_no_lone_surrogate(value, source, None)
    return value
