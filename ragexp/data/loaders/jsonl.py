"""Reading JSON Lines input files with 1-based line numbers for error messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.stored import limits


#: A JSON Lines corpus or eval set is read whole; larger than this is refused before it is read.
MAX_JSONL_BYTES = 4 * 1024**3


def read_text(path: Path, max_bytes: int = MAX_JSONL_BYTES) -> str:
    """The file's content decoded as strict UTF-8, byte for byte (no newline translation), when it
    is a regular file of at most ``max_bytes`` bytes (:func:`ragexp.stored.limits.read_text`).

    Raises :class:`RagexpInputError` naming the line of the first byte that is not UTF-8.
    """
    return limits.read_text(path, max_bytes=max_bytes)


def iter_jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for every non-blank line; each line must be a JSON object
    with no key twice in any of its objects (nested ones included).

    Each line is parsed within :mod:`ragexp.stored.limits`' bounds (depth, NaN and out-of-range
    numbers refused). Lines are split on ``\n`` only: JSON strings may legally hold raw U+2028 and similar characters
    that :meth:`str.splitlines` would treat as line breaks.
    """
    for line_number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        obj = limits.parse_json(line, source=path, line=line_number)  # bounded depth, no key twice, finite numbers
        if not isinstance(obj, dict):
            raise RagexpInputError(
                f"expected a JSON object per line, got {type(obj).__name__}", file=path, line=line_number
            )
        yield line_number, obj
