"""Content hashes: the identity of data and of cached work.

``stable_hash(obj)`` is the SHA-256 of the canonical JSON of ``obj`` (sorted keys, no
whitespace, UTF-8), so equal content gives an equal hash on every machine and Python version.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)


def _default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"cannot fingerprint object of type {type(obj).__name__}")


def stable_hash(obj: Any, length: int = 64) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]


def file_hash(path: str | Path, length: int = 64) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]
