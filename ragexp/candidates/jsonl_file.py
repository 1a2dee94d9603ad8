"""Writing a candidates or drafts file whole or not at all: JSON Lines streamed into the partial
file of :func:`ragexp.runtime.atomic_file.replacing`, renamed into place."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ragexp.runtime.atomic_file import replacing


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """``rows`` as one JSON object a line (UTF-8, not ASCII-escaped); a failure leaves ``path`` as it was."""
    with replacing(path) as partial, partial.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
