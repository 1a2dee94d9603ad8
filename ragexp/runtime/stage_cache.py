"""Content-addressed cache of expensive stage results (embeddings, indexes, scores).

An entry's key is ``stable_hash({"stage": stage, "parts": parts})`` where ``parts`` is exactly
what determines the result (corpus/chunk fingerprint, model id and weights hash, prefixes,
parameters ...), so equal work is found again and different work never collides.

Layout: ``<root>/<stage>/<key>/`` holding ``payload.<ext>``, ``payload.<ext>.sha256`` and
``key.json`` (the parts, for people; never read back). An entry is written into a temporary
folder and published by one ``rename``, so readers see whole entries or none, and concurrent
writers of the same key cannot mix files. Only safe formats: ``.npy``/``.npz`` loaded with
``allow_pickle=False``, and JSON. On read, a payload whose SHA-256 differs from its sidecar, a
missing sidecar or an undecodable payload is corrupted: it is reported with a
:class:`CacheCorruptionWarning`, deleted, and recomputed, never trusted. A full disk or an
unwritable cache folder fails the run with one line naming the folder (:func:`writing_cache`).
Inside :func:`ragexp.runtime.uncached.uncached` (work timed for its cost) every value is computed
and nothing is read or stored.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import uuid
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragexp.errors import RagexpInputError
from ragexp.runtime.fingerprint import canonical_json, stable_hash
from ragexp.runtime.uncached import bypassing

CACHE_DIR_ENV = "RAGEXP_CACHE_DIR"
DEFAULT_CACHE_DIR = ".ragexp_cache"


class CacheCorruptionWarning(UserWarning):
    """A cache entry failed its integrity check and was deleted."""


def default_cache_root() -> Path:
    """``$RAGEXP_CACHE_DIR`` if set, else ``./.ragexp_cache``."""
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR)


@dataclass(frozen=True)
class _Codec:
    suffix: str
    dump: Callable[[Any], bytes]
    load: Callable[[bytes], Any]
    reread_on_miss: bool = False  # return what a later hit would return (JSON turns tuples into lists)


def _dump_npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def _load_npy(payload: bytes) -> np.ndarray:
    return np.load(io.BytesIO(payload), allow_pickle=False)


def _dump_npz(arrays: Mapping[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **{name: np.asarray(a) for name, a in arrays.items()})
    return buffer.getvalue()


def _load_npz(payload: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


_NPY = _Codec("npy", _dump_npy, _load_npy)
_NPZ = _Codec("npz", _dump_npz, _load_npz)
_JSON = _Codec("json", lambda value: canonical_json(value).encode("utf-8"), json.loads, reread_on_miss=True)


class StageCache:
    """Content-addressed store with hit/miss/corruption counters per stage."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_root()
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.corrupted: Counter[str] = Counter()

    @staticmethod
    def key(stage: str, parts: Any) -> str:
        return stable_hash({"stage": stage, "parts": parts})

    def entry_dir(self, stage: str, parts: Any) -> Path:
        return self.root / stage / self.key(stage, parts)

    def get_or_compute_array(self, stage: str, parts: Any, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """One numeric/str array (no object dtype), stored as ``.npy``."""
        return self._get_or_compute(stage, parts, compute, _NPY)

    def get_or_compute_arrays(
        self, stage: str, parts: Any, compute: Callable[[], Mapping[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """Several named arrays, stored as one ``.npz``."""
        return dict(self._get_or_compute(stage, parts, compute, _NPZ))

    def get_or_compute_json(self, stage: str, parts: Any, compute: Callable[[], Any]) -> Any:
        """A JSON value. A miss returns the value as read back (tuples become lists), like a hit."""
        return self._get_or_compute(stage, parts, compute, _JSON)

    def get_json(self, stage: str, parts: Any) -> Any | None:
        """The stored JSON value, or ``None`` when absent or corrupted (counted as a miss)."""
        if bypassing():
            return None
        found, value = self._get(stage, parts, _JSON)
        return value if found else None

    def put_json(self, stage: str, parts: Any, value: Any) -> None:
        if bypassing():
            return
        self._publish(stage, parts, self.entry_dir(stage, parts), f"payload.{_JSON.suffix}", _JSON.dump(value))

    def _get(self, stage: str, parts: Any, codec: _Codec) -> tuple[bool, Any]:
        """``(True, value)`` for a verified entry, else ``(False, None)``."""
        entry = self.entry_dir(stage, parts)
        payload = self._verified_payload(stage, entry, entry / f"payload.{codec.suffix}") if entry.exists() else None
        if payload is not None:
            try:
                value = codec.load(payload)
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
                self._discard(stage, entry, f"undecodable payload: {err}")
            else:
                self.hits[stage] += 1
                return True, value
        self.misses[stage] += 1
        return False, None

    def _get_or_compute(self, stage: str, parts: Any, compute: Callable[[], Any], codec: _Codec) -> Any:
        if bypassing():
            return compute()
        found, value = self._get(stage, parts, codec)
        if found:
            return value
        value = compute()
        payload = codec.dump(value)
        self._publish(stage, parts, self.entry_dir(stage, parts), f"payload.{codec.suffix}", payload)
        return codec.load(payload) if codec.reread_on_miss else value

    def _verified_payload(self, stage: str, entry: Path, payload_path: Path) -> bytes | None:
        try:
            payload = payload_path.read_bytes()
            expected = (entry / f"{payload_path.name}.sha256").read_text(encoding="ascii").strip()
        except OSError as err:
            self._discard(stage, entry, f"unreadable: {err}")
            return None
        if hashlib.sha256(payload).hexdigest() != expected:
            self._discard(stage, entry, "payload SHA-256 differs from its sidecar")
            return None
        return payload

    def _discard(self, stage: str, entry: Path, reason: str) -> None:
        warnings.warn(f"corrupted cache entry {entry} ({reason}); deleted, recomputing", CacheCorruptionWarning, stacklevel=5)
        self.corrupted[stage] += 1
        shutil.rmtree(entry, ignore_errors=True)

    def _publish(self, stage: str, parts: Any, entry: Path, payload_name: str, payload: bytes) -> None:
        def fill(staging: Path) -> None:
            (staging / payload_name).write_bytes(payload)
            (staging / f"{payload_name}.sha256").write_text(hashlib.sha256(payload).hexdigest() + "\n", "ascii")
            (staging / "key.json").write_text(canonical_json({"stage": stage, "parts": parts}), "utf-8")

        with writing_cache(self.root):
            publish_dir(entry, fill)


#: Write failures that are the disk's or the folder's, not ragexp's: no space, quota, read-only, permission.
UNWRITABLE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


@contextlib.contextmanager
def writing_cache(root: Path) -> Iterator[None]:
    """Turn a full disk (ENOSPC, OSError 28) or an unwritable folder under the cache ``root`` into
    one line naming the folder and what to do (exit 2), not a traceback."""
    try:
        yield
    except OSError as err:
        if err.errno not in UNWRITABLE:
            raise
        raise RagexpInputError(
            f"cannot write the stage cache under {root}: {err.strerror} (errno {err.errno}); free space there or point "
            f"cache_dir (or ${CACHE_DIR_ENV}) at a writable disk with room",
            field="cache_dir",
        ) from None


def publish_dir(target: Path, fill: Callable[[Path], None]) -> None:
    """Build a folder with ``fill(staging)`` beside ``target`` and move it there in one rename, so
    readers never see a half-written folder; when another process published ``target`` first,
    its folder is kept (it is as good as ours)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".tmp-{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        fill(staging)
        os.rename(staging, target)
    except OSError:
        if not target.exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
