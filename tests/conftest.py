"""Shared fixtures: where the public data sets are, and a tiny own-format dataset."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from benchmarks import shared_data_dir
from tests.helpers.tiny_dataset import write_tiny_dataset

# The encoders' ONNX exports (ragexp.models.onnx_export), content-addressed: one folder for every
# test session and CLI subprocess on this machine, so a model is exported once, not per test.
os.environ.setdefault("RAGEXP_ONNX_EXPORT_DIR", str(Path(tempfile.gettempdir()) / "ragexp-test-onnx-exports"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "scifact" / "corpus.jsonl").exists():
        pytest.skip(f"shared data not found at {path} (set RAGEXP_SHARED_DATA)")
    return path


@pytest.fixture()
def tiny_dataset(tmp_path: Path) -> tuple[Path, Path]:
    """A four-document Markdown corpus and a six-question eval set in ragexp's own format."""
    return write_tiny_dataset(tmp_path)


