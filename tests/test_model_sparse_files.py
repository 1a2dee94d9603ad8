"""Issue #52 (low): a model whose files are mostly holes is refused before anything is hashed.

A model folder holding a 20 GB sparse weights file was hashed for 97 s before it was refused.
:func:`ragexp.models.resolve.model_fingerprint` now checks every file's size against what the disk
holds first. Fails before (``bd8562d``): every case hashes (the hash function is called).
"""

from __future__ import annotations

import pytest

from ragexp.errors import RagexpInputError
from ragexp.models import resolve

GIB = 1 << 30


def _sparse(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


@pytest.mark.parametrize("layout", ["folder weights", "nested weights", "onnx graph", "gguf file", "onnx tokenizer"])
def test_a_sparse_model_file_is_refused_before_hashing(tmp_path, monkeypatch, layout):
    def no_hashing(path, *args, **kwargs):
        raise AssertionError(f"hashed {path}")

    monkeypatch.setattr(resolve, "file_hash", no_hashing)
    resolve._file_digest.cache_clear()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    if layout == "folder weights":
        _sparse(folder / "model.safetensors", 20 * GIB)
        model = resolve.resolve_model(str(folder))
    elif layout == "nested weights":
        _sparse(folder / "1_Pooling" / "weights.bin", 20 * GIB)
        model = resolve.resolve_model(str(folder))
    elif layout == "onnx graph":
        (folder / "tokenizer.json").write_text("{}")
        model = resolve.resolve_model(str(_sparse(folder / "model.onnx", 20 * GIB)))
    elif layout == "gguf file":
        model = resolve.resolve_model(str(_sparse(folder / "m.gguf", 20 * GIB)))
    else:
        _sparse(folder / "tokenizer.json", 2 * GIB)
        (folder / "model.onnx").write_bytes(b"graph")
        model = resolve.resolve_model(str(folder / "model.onnx"))
    with pytest.raises(RagexpInputError, match="sparse file") as raised:
        resolve.model_fingerprint(model)
    assert "\n" not in str(raised.value)


def test_a_written_model_file_is_hashed(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "weights.bin").write_bytes(b"\1" * (resolve._SPARSE_CHECK_BYTES + 1))
    resolve._file_digest.cache_clear()
    assert len(resolve.model_fingerprint(resolve.resolve_model(str(folder)))) == 64
