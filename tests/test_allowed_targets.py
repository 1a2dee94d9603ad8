"""Only allowed ``_target_`` s are instantiated: the shipped components and what the user allows.

The attack of issue #13: anyone who can write to a shared store edits a run's stored
``config/resolved.yaml`` to ``_target_: logging.FileHandler, filename: VICTIM, mode: w``, and every
``ragexp reproduce`` of that run truncated VICTIM. Now reproduce refuses it, naming the target and
how to allow one, and VICTIM is untouched; a user's own retriever runs once allowed by
``RAGEXP_ALLOWED_TARGETS``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from ragexp.config import targets
from ragexp.config.targets import check_targets
from ragexp.errors import RagexpInputError
from ragexp.tracking.metric_names import results_view
from tests.helpers.cli import ENV, dataset_args, job_runs

VICTIM_TEXT = "do not truncate me\n"


def ragexp(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, env=env or ENV, capture_output=True,
                          text=True, timeout=600, check=False)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


@pytest.mark.slow
def test_reproduce_refuses_a_stored_config_naming_another_target(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    first = ragexp(tmp_path, "run", *dataset_args(tiny_dataset, db), "retrieval=bm25")
    assert first.returncode == 0, first.stderr[-3000:]
    client, _, (run,) = job_runs(db)
    stored = Path(unquote(urlparse(client.get_run(run.info.run_id).info.artifact_uri).path)) / "config" / "resolved.yaml"
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    config = yaml.safe_load(stored.read_text(encoding="utf-8"))
    config["retrieval"] = {"name": "bm25", "_target_": "logging.FileHandler", "filename": str(victim), "mode": "w"}
    stored.write_text(yaml.safe_dump(config), encoding="utf-8")

    proc = ragexp(tmp_path, "reproduce", run.info.run_id, "--tracking-uri", f"sqlite:///{db}")
    line = one_error_line(proc)
    assert line.startswith("ragexp reproduce: error: field 'retrieval._target_': _target_ 'logging.FileHandler' is not "
                           "an allowed component"), line
    assert "RAGEXP_ALLOWED_TARGETS" in line and "ragexp.components" in line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert len(job_runs(db)[2]) == 1  # no reproduction logged

    # the same through a nested node, and through an allowed module's import of another one
    for retrieval in ({"name": "h", "_target_": "reference_pipelines.hybrid.HybridRetriever",
                       "retrievers": [{"_target_": "logging.FileHandler", "filename": str(victim), "mode": "w"}]},
                      {"name": "x", "_target_": "reference_pipelines.bm25.logging.FileHandler", "filename": str(victim),
                       "mode": "w"}):
        stored.write_text(yaml.safe_dump({**config, "retrieval": retrieval}), encoding="utf-8")
        line = one_error_line(ragexp(tmp_path, "reproduce", run.info.run_id, "--tracking-uri", f"sqlite:///{db}"))
        assert "is not an allowed component" in line and "_target_" in line, line
        assert victim.read_text(encoding="utf-8") == VICTIM_TEXT

    stored.write_text(yaml.safe_dump({**config, "cache_dir": "${oc.env:HOME}"}), encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "reproduce", run.info.run_id, "--tracking-uri", f"sqlite:///{db}"))
    assert "field 'cache_dir': a saved config holds no interpolation" in line, line


KEYWORD_RETRIEVER = '''
class KeywordRetriever:
    """Ranks by the number of query words a chunk contains (the method article's retrieve(query) -> ids)."""

    def __init__(self, min_overlap: int = 1):
        self.min_overlap = min_overlap

    def index(self, chunks):
        self.chunks = [(chunk.id, set(chunk.text.lower().split())) for chunk in chunks]

    def retrieve(self, query):
        words = set(query.lower().split())
        scored = [(len(words & text), cid) for cid, text in self.chunks if len(words & text) >= self.min_overlap]
        return [cid for _, cid in sorted(scored, reverse=True)]
'''


@pytest.mark.slow
def test_a_users_own_retriever_runs_once_allowed(tiny_dataset, tmp_path):
    package = tmp_path / "user_code"
    package.mkdir()
    (package / "my_rag_search.py").write_text(KEYWORD_RETRIEVER, encoding="utf-8")
    conf = tmp_path / "user_conf" / "retrieval"
    conf.mkdir(parents=True)
    (conf / "keyword.yaml").write_text("name: keyword\n_target_: my_rag_search.KeywordRetriever\nmin_overlap: 1\n", "utf-8")
    db = tmp_path / "mlflow.db"
    args = ["run", "--config-dir", str(tmp_path / "user_conf"), *dataset_args(tiny_dataset, db), "retrieval=keyword"]
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(package), ENV.get("PYTHONPATH", "")])}

    refused = one_error_line(ragexp(tmp_path, *args, env=env))
    assert "field 'retrieval._target_': _target_ 'my_rag_search.KeywordRetriever' is not an allowed component" in refused
    assert not db.exists() or not job_runs(db)[2]

    allowed = ragexp(tmp_path, *args, env={**env, "RAGEXP_ALLOWED_TARGETS": "my_rag_search"})
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    _, _, (run,) = job_runs(db)
    assert run.info.status == "FINISHED" and run.data.params["retrieval._target_"] == "my_rag_search.KeywordRetriever"
    assert results_view(run.data.metrics, run.data.params)["hit_rate_at_10"] > 0  # it really retrieved


def test_every_nested_target_is_checked_before_any_import(monkeypatch):
    monkeypatch.delenv("RAGEXP_ALLOWED_TARGETS", raising=False)
    shipped = {"_target_": "reference_pipelines.hybrid.HybridRetriever",
               "retrievers": [{"_target_": "reference_pipelines.bm25.BM25Retriever"},
                              {"_target_": "reference_pipelines.dense.DenseRetriever",
                               "encoder": {"_target_": "reference_pipelines.encoders.make_encoder", "model": "minilm"}}]}
    check_targets(shipped, "retrieval")  # the shipped configs pass
    hostile = {**shipped, "retrievers": [*shipped["retrievers"], {"_target_": "os.system", "command": "true"}]}
    with pytest.raises(RagexpInputError, match="'os.system' is not an allowed component") as caught:
        check_targets(hostile, "retrieval")
    assert caught.value.field == "retrieval.retrievers[2]._target_"
    imported = []
    monkeypatch.setattr(targets, "get_object", lambda name: imported.append(name))
    for name in ("reference_pipelines_evil.Retriever", "ragexp.cli.main", "ragexp.tracking.run_logger.save_local", "builtins.exec"):
        with pytest.raises(RagexpInputError, match="not an allowed component"):
            check_targets({"_target_": name}, "reranker")
    assert imported == []  # refused by name: nothing outside the allow-list was imported


def test_a_target_reaching_another_module_through_an_allowed_one_is_refused(monkeypatch):
    monkeypatch.delenv("RAGEXP_ALLOWED_TARGETS", raising=False)
    for name, defined_in in (("reference_pipelines.bm25.np.save", "numpy"), ("reference_pipelines.bm25.logging.FileHandler", "logging")):
        with pytest.raises(RagexpInputError, match=rf"defined in '{defined_in}") as caught:
            check_targets({"_target_": name}, "retrieval")
        assert caught.value.field == "retrieval._target_"


def test_user_allowed_prefixes_and_entry_points(monkeypatch):
    monkeypatch.setenv("RAGEXP_ALLOWED_TARGETS", " json , collections.")
    check_targets({"_target_": "json.JSONDecoder"}, "retrieval")
    check_targets({"_target_": "collections.OrderedDict"}, "retrieval")
    with pytest.raises(RagexpInputError):
        check_targets({"_target_": "jsonschema_evil.X"}, "retrieval")  # prefixes match whole module names
    monkeypatch.delenv("RAGEXP_ALLOWED_TARGETS")
    with pytest.raises(RagexpInputError):
        check_targets({"_target_": "fractions.Fraction"}, "retrieval")
    entry = EntryPoint(name="fraction", value="fractions:Fraction", group=targets.ENTRY_POINT_GROUP)
    monkeypatch.setattr(targets, "entry_points", lambda group: [entry] if group == targets.ENTRY_POINT_GROUP else [])
    check_targets({"_target_": "fractions.Fraction"}, "retrieval")
    with pytest.raises(RagexpInputError):
        check_targets({"_target_": "fractions.Decimal"}, "retrieval")  # only the registered object


def test_the_shipped_configs_name_only_allowed_targets(monkeypatch):
    monkeypatch.delenv("RAGEXP_ALLOWED_TARGETS", raising=False)
    conf = Path(__file__).resolve().parents[1] / "conf"
    files = [file for file in conf.rglob("*.yaml") if file.name != "config.yaml"]  # config.yaml: Hydra's own callback
    for file in files:
        check_targets(yaml.safe_load(file.read_text(encoding="utf-8")) or {}, f"{file.parent.name}/{file.stem}")
    assert sum("_target_:" in file.read_text(encoding="utf-8") for file in files) >= 14
