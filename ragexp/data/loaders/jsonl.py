"""Reading JSON Lines input files with 1-based line numbers for error messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ragexp.errors import RagexpInputError


def read_text(path: Path) -> str:
    """The file's content decoded as strict UTF-8, byte for byte (no newline translation).

    Raises :class:`RagexpInputError` naming the line of the first byte that is not UTF-8.
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise RagexpInputError(
            f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); re-save the file as UTF-8",
            file=path,
            line=line,
        ) from None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook`` refusing a key twice in one object (``json`` would keep the last silently)."""
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def iter_jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for every non-blank line; each line must be a JSON object
    with no key twice in any of its objects (nested ones included).

    Lines are split on ``\n`` only: JSON strings may legally hold raw U+2028 and similar characters
    that :meth:`str.splitlines` would treat as line breaks.
    """
    for line_number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKey as err:
            raise RagexpInputError(
                "the key appears twice in one JSON object (JSON would silently keep the last); keep one",
                file=path,
                line=line_number,
                field=err.key,
            ) from None
        except json.JSONDecodeError as err:
            raise RagexpInputError(
                f"malformed JSON at column {err.colno}: {err.msg}; each line must be one complete JSON object",
                file=path,
                line=line_number,
            ) from None
        if not isinstance(obj, dict):
            raise RagexpInputError(
                f"expected a JSON object per line, got {type(obj).__name__}", file=path, line=line_number
            )
        yield line_number, obj
