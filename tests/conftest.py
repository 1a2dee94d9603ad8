"""Shared fixtures: where the public data sets are, a tiny own-format dataset, a fresh headless
Chromium page, and a check that no test writes into the repository (the suite runs on parallel
workers that share it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from benchmarks import shared_data_dir
from tests.helpers.chromium import fresh_page
from tests.helpers.tiny_dataset import write_tiny_dataset

# The encoders' ONNX exports (ragexp.models.onnx_export), content-addressed: one folder for every
# test session and CLI subprocess on this machine, so a model is exported once, not per test.
os.environ.setdefault("RAGEXP_ONNX_EXPORT_DIR", str(Path(tempfile.gettempdir()) / "ragexp-test-onnx-exports"))

REPO = Path(__file__).resolve().parents[1]
#: What ragexp and MLflow write into the working directory by default.
CWD_OUTPUTS = ("mlruns", "mlflow.db", "outputs", "multirun", ".ragexp_cache")


@pytest.fixture(scope="session", autouse=True)
def _nothing_written_into_the_repo():
    """Fails the session when a test left one of :data:`CWD_OUTPUTS` in the repository: a test
    writes below its ``tmp_path`` (``monkeypatch.chdir(tmp_path)`` for MLflow's ``./mlruns``), or
    parallel workers share the file."""
    before = {name for name in CWD_OUTPUTS if (REPO / name).exists()}
    yield
    left = [name for name in CWD_OUTPUTS if (REPO / name).exists() and name not in before]
    assert not left, f"a test wrote {left} into {REPO}; run it in tmp_path (monkeypatch.chdir(tmp_path))"


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


@pytest.fixture()
def page():
    """A page of a freshly launched headless Chromium (tests/helpers/chromium.py): a first visit in
    a 1600x1000 window, every wait and ``expect`` giving up after 60 s. The module using it skips
    itself without Playwright (``pytest.importorskip``) and carries ``BROWSER_MARKS``."""
    with fresh_page() as page:
        yield page
