"""Distinct work once: one stored vector per (encoder identity, role, text), shared by every run.

:class:`CachedEncoder` wraps an encoder: of the texts it is asked for, only those never encoded
with this encoder identity (model weights, backend, precision, prefixes, length; see
:attr:`ragexp.models.encoders.Encoder.identity`) reach the model, each distinct one once; the
others are read back. So chunks that three chunkings share, or the eval queries every job of a
sweep asks, are encoded once per model. A text is keyed by ``sha256(role + "\\0" + text)`` with
role ``query`` or ``passage`` (the two may be prefixed differently).

Layout, in the stage cache folder: ``<root>/text-vectors/<stable_hash(identity)>/<batch key>/``
holding ``payload.npz`` (``keys``: uint8 ``(n, 32)`` digests, ``vectors``: float32 ``(n, dim)``),
its ``.sha256`` sidecar and ``key.json`` (the identity, for people). Batches are published by one
rename, so parallel jobs add theirs without locks; a batch failing its checksum is reported with
:class:`~ragexp.runtime.stage_cache.CacheCorruptionWarning`, deleted and its texts encoded again.
A store reads all its batches on the first lookup and new ones whenever a text is missing.

How many distinct texts were encoded and how many read back, per encoder, is counted in this
process (:func:`encoding_counts`) and recorded with each run (``meta.encodings``, with the reason
where a model runs on torch instead of ONNX, :data:`BACKEND_NOTES`).
Inside :func:`ragexp.runtime.uncached.uncached` queries are encoded afresh and not stored (and
passages too with ``index=True``), neither counted.
"""

from __future__ import annotations

import hashlib
import io
import logging
import shutil
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragexp.runtime.fingerprint import canonical_json, stable_hash
from ragexp.runtime.stage_cache import (
    CacheCorruptionWarning,
    StageCache,
    publish_dir,
    writing_cache,
)
from ragexp.runtime.uncached import bypassing, bypassing_passages

STAGE = "text-vectors"
PAYLOAD = "payload.npz"
_COUNTS: dict[str, Counter[str]] = {}
_MODELS: dict[str, str] = {}  # encoder label -> model name
#: Why a model runs on another backend than configured, by model name (filled by the encoders).
BACKEND_NOTES: dict[str, str] = {}
log = logging.getLogger(__name__)


def encoding_counts() -> dict[str, dict[str, int]]:
    """``{encoder label: {"encoded": n, "cached": m}}`` of distinct texts, so far in this process."""
    return {label: dict(counts) for label, counts in _COUNTS.items()}


def encodings_since(before: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """What :func:`encoding_counts` gained since ``before``, per encoder label, with the reason
    (``note``) where the model runs on another backend than configured; logged."""
    gained = {}
    for label, counts in encoding_counts().items():
        delta = {kind: counts.get(kind, 0) - before.get(label, {}).get(kind, 0) for kind in ("encoded", "cached")}
        if any(delta.values()):
            note = BACKEND_NOTES.get(_MODELS.get(label, ""))
            gained[label] = {**delta, **({"note": note} if note else {})}
            log.info("%s: %d distinct texts encoded, %d read from the text-vector cache", label, delta["encoded"], delta["cached"])
    return gained


def encoder_label(identity: dict[str, Any]) -> str:
    """``"<model> <backend> <precision>"`` for an encoder identity (the encoder class where it has no model)."""
    model = identity.get("model")
    name = model.get("name") if isinstance(model, dict) else identity.get("encoder", "encoder")
    return " ".join(str(part) for part in (name, identity.get("backend"), identity.get("precision")) if part)


def text_key(role: str, text: str) -> bytes:
    return hashlib.sha256(f"{role}\0{text}".encode()).digest()


class TextVectorStore:
    """The stored vectors of one encoder identity (see the module docstring)."""

    def __init__(self, folder: Path, identity: dict[str, Any]) -> None:
        self.folder = folder
        self.identity = identity
        self.vectors: dict[bytes, np.ndarray] = {}
        self._read: set[str] = set()

    def refresh(self) -> None:
        """Read the batches published since the last call."""
        if not self.folder.is_dir():
            return
        for entry in sorted(self.folder.iterdir()):
            if entry.name in self._read or entry.name.startswith(".tmp-"):
                continue
            batch = self._verified(entry)
            if batch is not None:
                keys, vectors = batch
                self.vectors.update((bytes(key), row) for key, row in zip(keys, vectors))
                self._read.add(entry.name)

    def _verified(self, entry: Path) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            payload = (entry / PAYLOAD).read_bytes()
            expected = (entry / f"{PAYLOAD}.sha256").read_text("ascii").strip()
            if hashlib.sha256(payload).hexdigest() != expected:
                raise ValueError("payload SHA-256 differs from its sidecar")
            with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
                return archive["keys"], archive["vectors"]
        except (OSError, ValueError, KeyError, EOFError) as err:
            warnings.warn(f"corrupted cache entry {entry} ({err}); deleted, recomputing", CacheCorruptionWarning, stacklevel=4)
            shutil.rmtree(entry, ignore_errors=True)
            return None

    def add(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Publish one batch and keep its rows."""
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
        buffer = io.BytesIO()
        np.savez(buffer, keys=key_array, vectors=np.asarray(vectors, dtype=np.float32))
        payload = buffer.getvalue()
        name = hashlib.sha256(key_array.tobytes()).hexdigest()

        def fill(staging: Path) -> None:
            (staging / PAYLOAD).write_bytes(payload)
            (staging / f"{PAYLOAD}.sha256").write_text(hashlib.sha256(payload).hexdigest() + "\n", "ascii")
            (staging / "key.json").write_text(canonical_json({"stage": STAGE, "encoder": self.identity}), "utf-8")

        with writing_cache(self.folder.parent.parent):
            publish_dir(self.folder / name, fill)
        self._read.add(name)
        self.vectors.update(zip(keys, np.asarray(vectors, dtype=np.float32)))


_STORES: dict[Path, TextVectorStore] = {}


def store_for(cache: StageCache, identity: dict[str, Any]) -> TextVectorStore:
    """The process's one store object for this cache folder and encoder identity."""
    folder = cache.root / STAGE / stable_hash(identity)
    if folder not in _STORES:
        _STORES[folder] = TextVectorStore(folder, identity)
    return _STORES[folder]


class CachedEncoder:
    """An encoder whose texts are encoded once per identity (module docstring). Every other
    attribute is the wrapped encoder's."""

    def __init__(self, encoder: Any, cache: StageCache) -> None:
        self.encoder = encoder
        self.cache = cache
        self.identity = encoder.identity

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["encoder"], name)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("query", texts, self.encoder.encode_queries)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("passage", texts, self.encoder.encode_passages)

    def _encode(self, role: str, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        if bypassing_passages() or (role == "query" and bypassing()):
            return encode(list(texts))
        store = store_for(self.cache, self.identity)
        keys = [text_key(role, text) for text in texts]
        if any(key not in store.vectors for key in keys):
            store.refresh()
        missing = {key: text for key, text in zip(keys, texts) if key not in store.vectors}
        label = encoder_label(self.identity)
        model = self.identity.get("model")
        _MODELS[label] = model.get("name", "") if isinstance(model, dict) else ""
        counts = _COUNTS.setdefault(label, Counter())
        counts["encoded"] += len(missing)
        counts["cached"] += len(set(keys)) - len(missing)
        if missing:
            store.add(list(missing), encode(list(missing.values())))
        if not keys:
            return encode([])
        return np.stack([store.vectors[key] for key in keys])


def with_text_vectors(encoder: Any, cache: StageCache | None) -> Any:
    """``encoder`` wrapped in a :class:`CachedEncoder` over ``cache`` (unchanged without a cache or
    when it already is one)."""
    if cache is None or isinstance(encoder, CachedEncoder):
        return encoder
    return CachedEncoder(encoder, cache)
