"""Which converters last read a corpus folder, so a run can say *why* its corpus is new.

One small JSON file per folder, ``<cache root>/corpus_converters/<hash of the folder path>.json``
(``{"folder": ..., "converters": {format: identity}}``), replaced atomically each time a run's
data is accepted; unlike a stage-cache entry its content changes while its name stays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ragexp.runtime.atomic_file import atomic_write
from ragexp.runtime.fingerprint import stable_hash

FOLDER = "corpus_converters"


def _record_path(cache_root: Path, folder: Path) -> Path:
    return cache_root / FOLDER / f"{stable_hash(str(folder.resolve()), length=32)}.json"


def converter_changes(cache_root: Path, folder: Path, converters: Mapping[str, str]) -> list[str]:
    """``"converter pdf went from 'A' to 'B'"`` for each format whose converter differs from the
    one recorded for ``folder`` (nothing when there is no readable record)."""
    try:
        before = json.loads(_record_path(cache_root, folder).read_text(encoding="utf-8"))["converters"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if not isinstance(before, Mapping):
        return []
    return [f"converter {name} went from {before[name]!r} to {identity!r}"
            for name, identity in sorted(converters.items()) if before.get(name) not in (None, identity)]


def record_converters(cache_root: Path, folder: Path, converters: Mapping[str, str]) -> None:
    """Replace ``folder``'s record with ``converters``, whole or not at all."""
    path = _record_path(cache_root, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"folder": str(folder.resolve()), "converters": dict(converters)}))
