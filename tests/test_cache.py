"""StageCache: hits and misses, safe formats only, corrupted entries detected and rebuilt."""

from __future__ import annotations

import hashlib
import io
import pickle

import numpy as np
import pytest

from ragexp.runtime.stage_cache import (
    CacheCorruptionWarning,
    StageCache,
    default_cache_root,
)


class Counting:
    """A compute function that records how often it ran."""

    def __init__(self, value) -> None:
        self.value = value
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.value


def test_array_json_and_npz_round_trip_with_counters(tmp_path) -> None:
    cache = StageCache(tmp_path)
    array = Counting(np.arange(12, dtype=np.float32).reshape(3, 4))
    for _ in range(2):
        np.testing.assert_array_equal(cache.get_or_compute_array("emb", {"model": "m"}, array), array.value)
    named = Counting({"a": np.array([1, 2]), "terms": np.array(["x", "ÿ"])})
    for _ in range(2):
        got = cache.get_or_compute_arrays("idx", {"p": 1}, named)
        assert got.keys() == {"a", "terms"} and got["terms"].tolist() == ["x", "ÿ"]
    doc = Counting({"scores": (1.5, 2.0)})
    assert cache.get_or_compute_json("scores", ["q"], doc) == {"scores": [1.5, 2.0]}  # a miss reads back like a hit
    assert cache.get_or_compute_json("scores", ["q"], doc) == {"scores": [1.5, 2.0]}
    assert (array.calls, named.calls, doc.calls) == (1, 1, 1)
    assert cache.hits == {"emb": 1, "idx": 1, "scores": 1} and cache.misses == {"emb": 1, "idx": 1, "scores": 1}


def test_key_depends_on_stage_and_every_part(tmp_path) -> None:
    cache = StageCache(tmp_path)
    keys = {
        cache.key("emb", {"model": "m", "prefix": ""}),
        cache.key("emb", {"model": "m", "prefix": "query: "}),
        cache.key("index", {"model": "m", "prefix": ""}),
    }
    assert len(keys) == 3
    assert cache.key("emb", {"prefix": "", "model": "m"}) in keys  # key order does not matter


def test_json_get_and_put(tmp_path) -> None:
    cache = StageCache(tmp_path)
    assert cache.get_json("rerank", {"q": 1}) is None
    cache.put_json("rerank", {"q": 1}, [0.5, -1.0])
    assert StageCache(tmp_path).get_json("rerank", {"q": 1}) == [0.5, -1.0]


def _payload(cache: StageCache, stage: str, parts, suffix: str):
    return cache.entry_dir(stage, parts) / f"payload.{suffix}"


@pytest.mark.parametrize("damage", ["flip-byte", "drop-sidecar", "truncate"])
def test_corrupted_entry_is_detected_deleted_and_rebuilt(tmp_path, damage: str) -> None:
    cache = StageCache(tmp_path)
    good = np.linspace(0, 1, 50, dtype=np.float32)
    cache.get_or_compute_array("emb", {"k": 1}, lambda: good)
    payload = _payload(cache, "emb", {"k": 1}, "npy")
    if damage == "flip-byte":
        raw = bytearray(payload.read_bytes())
        raw[-1] ^= 0xFF
        payload.write_bytes(bytes(raw))
    elif damage == "drop-sidecar":
        payload.with_name("payload.npy.sha256").unlink()
    else:
        payload.write_bytes(payload.read_bytes()[:40])

    recompute = Counting(good)
    with pytest.warns(CacheCorruptionWarning, match="corrupted cache entry"):
        value = cache.get_or_compute_array("emb", {"k": 1}, recompute)
    np.testing.assert_array_equal(value, good)
    assert recompute.calls == 1 and cache.corrupted["emb"] == 1
    assert StageCache(tmp_path).get_or_compute_array("emb", {"k": 1}, Counting(None)).tolist() == good.tolist()


def test_pickled_payload_is_never_loaded_even_with_a_matching_sidecar(tmp_path) -> None:
    """Someone replaces a payload with a pickle-bearing .npy and fixes the hash: still refused."""
    cache = StageCache(tmp_path)
    cache.get_or_compute_array("emb", {"k": 1}, lambda: np.zeros(3))
    payload = _payload(cache, "emb", {"k": 1}, "npy")
    evil = io.BytesIO()
    np.save(evil, np.array([{"boom": 1}], dtype=object), allow_pickle=True)
    payload.write_bytes(evil.getvalue())
    payload.with_name("payload.npy.sha256").write_text(hashlib.sha256(evil.getvalue()).hexdigest())
    with pytest.warns(CacheCorruptionWarning, match="undecodable"):
        value = cache.get_or_compute_array("emb", {"k": 1}, lambda: np.ones(3))
    assert value.tolist() == [1.0, 1.0, 1.0]


def test_object_arrays_are_refused_on_write(tmp_path) -> None:
    with pytest.raises(ValueError):
        StageCache(tmp_path).get_or_compute_array("emb", {}, lambda: np.array([pickle], dtype=object))


def test_entries_are_published_whole(tmp_path) -> None:
    cache = StageCache(tmp_path)
    cache.get_or_compute_json("s", {"a": 1}, lambda: {"x": 1})
    entry = cache.entry_dir("s", {"a": 1})
    assert sorted(p.name for p in entry.iterdir()) == ["key.json", "payload.json", "payload.json.sha256"]
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".tmp-")]


def test_default_root_from_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGEXP_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert StageCache().root == tmp_path / "elsewhere" == default_cache_root()
    monkeypatch.delenv("RAGEXP_CACHE_DIR")
    assert default_cache_root().name == ".ragexp_cache"
