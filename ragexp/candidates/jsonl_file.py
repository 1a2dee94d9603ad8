"""Writing a candidates or drafts file whole or not at all: JSON Lines through a partial file beside
it (created with the user's umask, like any file the user writes) renamed into place."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """``rows`` as one JSON object a line (UTF-8, not ASCII-escaped); a failure leaves ``path`` as it was."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
