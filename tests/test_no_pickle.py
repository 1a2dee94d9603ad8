"""No pickle anywhere data is read back: a source guard, and the stage cache as the pipelines use it.

Unpickling runs arbitrary code, and cached stages, model files and configs can come from other
machines (a shared cache folder, a downloaded model). The guard parses every module of
``ragexp/`` and ``reference_pipelines/`` and fails naming ``file:line`` for: importing a pickle
module (``pickle``, ``_pickle``, ``cPickle``, ``cloudpickle``, ``dill``, ``shelve``), ``joblib.load``,
``pandas.read_pickle``, ``torch.load`` without a literal ``weights_only=True``, and any call with
``allow_pickle=True``. Config ``_target_`` s in ``conf/`` must not name such callables either.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from ragexp.datamodel import Chunk
from ragexp.runtime.stage_cache import StageCache

REPO = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES = ("ragexp", "reference_pipelines")
PICKLE_MODULES = frozenset({"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "shelve"})
UNPICKLING_CALLS = frozenset({"joblib.load", "pandas.read_pickle", "pd.read_pickle"})
SAFE_PAYLOAD_SUFFIXES = frozenset({".npy", ".npz", ".json"})


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ``""``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return ""


def _keyword_is_true(call: ast.Call, name: str) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


def pickle_uses(source: str, filename: str) -> list[str]:
    """``filename:line: what`` for every pickle use in ``source`` (see the module docstring)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        what = None
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.split(".")[0] in PICKLE_MODULES]
            what = f"import {', '.join(names)}" if names else None
        elif isinstance(node, ast.ImportFrom) and node.module:
            loaders = [a.name for a in node.names if f"{node.module}.{a.name}" in UNPICKLING_CALLS | {"torch.load"}]
            if node.module.split(".")[0] in PICKLE_MODULES:
                what = f"from {node.module} import ..."
            elif loaders:
                what = f"from {node.module} import {', '.join(loaders)}"
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in UNPICKLING_CALLS:
                what = f"{name}(...)"
            elif name == "torch.load" and not _keyword_is_true(node, "weights_only"):
                what = "torch.load(...) without weights_only=True"
            elif _keyword_is_true(node, "allow_pickle"):
                what = f"{name or 'call'}(..., allow_pickle=True)"
        if what:
            found.append(f"{filename}:{node.lineno}: {what}")
    return found


def config_targets(node) -> list[str]:
    """Every ``_target_`` value in a parsed YAML tree."""
    if isinstance(node, dict):
        own = [str(node["_target_"])] if "_target_" in node else []
        return own + [t for value in node.values() for t in config_targets(value)]
    if isinstance(node, list):
        return [t for value in node for t in config_targets(value)]
    return []


def test_sources_never_unpickle() -> None:
    files = sorted(p for package in SOURCE_PACKAGES for p in (REPO / package).rglob("*.py"))
    assert len(files) > 20, "the guard found too few sources to scan"
    found = [use for file in files for use in pickle_uses(file.read_text("utf-8"), str(file.relative_to(REPO)))]
    assert found == [], "pickle use (unpickling runs arbitrary code):\n" + "\n".join(found)


def test_config_targets_never_name_an_unpickling_callable() -> None:
    files = sorted((REPO / "conf").rglob("*.yaml"))
    targets = {(str(f.relative_to(REPO)), t) for f in files for t in config_targets(yaml.safe_load(f.read_text("utf-8")))}
    assert targets, "no _target_ found in conf/"
    bad = sorted(
        f"{file}: _target_ {target}"
        for file, target in targets
        if target.split(".")[0] in PICKLE_MODULES or target in UNPICKLING_CALLS | {"torch.load", "numpy.load"}
    )
    assert bad == []


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("import pickle", "x.py:1: import pickle"),
        ("import os, cloudpickle as cp", "x.py:1: import cloudpickle"),
        ("from dill import loads", "x.py:1: from dill import ..."),
        ("from joblib import dump, load", "x.py:1: from joblib import load"),
        ("import joblib\nmodel = joblib.load(path)", "x.py:2: joblib.load(...)"),
        ("frame = pd.read_pickle(path)", "x.py:1: pd.read_pickle(...)"),
        ("state = torch.load(path)", "x.py:1: torch.load(...) without weights_only=True"),
        ("state = torch.load(path, weights_only=False)", "x.py:1: torch.load(...) without weights_only=True"),
        ("state = torch.load(\n    path,\n    map_location='cpu',\n)", "x.py:1: torch.load(...) without weights_only=True"),
        ("arr = np.load(path, allow_pickle=True)", "x.py:1: np.load(..., allow_pickle=True)"),
    ],
)
def test_guard_flags_each_pickle_form(snippet: str, expected: str) -> None:
    assert pickle_uses(snippet, "x.py") == [expected]


def test_guard_passes_safe_forms() -> None:
    safe = '''
"""Only JSON is read back, never pickle."""
import joblib  # Parallel only
state = torch.load(path, map_location="cpu", weights_only=True)
arr = np.load(path, allow_pickle=False)
np.save(buffer, arr, allow_pickle=False)
text = "pickle.load is not called here"
'''
    assert pickle_uses(safe, "x.py") == []


class HashingEncoder:
    """Deterministic 16-d unit vectors from a text's bytes: enough to build FAISS indexes."""

    identity = {"encoder": "hashing", "dim": 16}

    def _encode(self, texts) -> np.ndarray:
        rows = np.array([np.random.default_rng(list(text.encode())).standard_normal(16) for text in texts], np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    encode_queries = encode_passages = _encode


def test_stage_cache_written_by_the_pipelines_holds_only_safe_payloads(tmp_path: Path) -> None:
    """BM25, dense (flat/hnsw/ivf) and a run's chunk/retrieval stages all write through the cache."""
    from reference_pipelines.bm25 import BM25Retriever
    from reference_pipelines.dense import DenseRetriever

    cache = StageCache(tmp_path)
    chunks = [Chunk(f"d{i}#chunk_0", f"d{i}", 0, 0, 12, f"passage {i} about topic {i % 7}") for i in range(200)]
    queries = ["topic 3", "passage 42"]
    for retriever in (
        BM25Retriever(cache=cache),
        *(DenseRetriever(encoder=HashingEncoder(), index=kind, cache=cache) for kind in ("flat", "hnsw", "ivf")),
    ):
        retriever.index(chunks)
        assert len(retriever.search(queries, 5)[0]) == 5
    cache.get_or_compute_json("chunks", {"corpus": "c"}, lambda: [{"id": c.id, "start": c.start} for c in chunks])

    entries = sorted(p for p in tmp_path.glob("*/*") if p.is_dir())
    stages = {entry.parent.name for entry in entries}
    assert {"bm25-index", "embeddings", "query-embeddings", "faiss-index", "chunks", "text-vectors"} <= stages, stages
    # text-vectors/<encoder identity>/<batch>: the batch folders are the entries
    entries = [e for e in entries if e.parent.name != "text-vectors"] + sorted(tmp_path.glob("text-vectors/*/*"))
    assert not list(tmp_path.rglob(".tmp-*")), "a staging folder was left behind"
    for entry in entries:
        payloads = [p for p in entry.iterdir() if p.name.startswith("payload.") and not p.name.endswith(".sha256")]
        assert len(payloads) == 1 and payloads[0].suffix in SAFE_PAYLOAD_SUFFIXES, sorted(entry.iterdir())
        payload = payloads[0]
        assert {p.name for p in entry.iterdir()} == {payload.name, f"{payload.name}.sha256", "key.json"}
        json.loads((entry / "key.json").read_text("utf-8"))
        if payload.suffix == ".json":
            json.loads(payload.read_text("utf-8"))
        elif payload.suffix == ".npy":
            assert np.load(payload, allow_pickle=False).dtype != object
        else:
            with np.load(payload, allow_pickle=False) as archive:
                assert all(archive[name].dtype != object for name in archive.files)
