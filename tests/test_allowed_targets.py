"""Only allowed ``_target_`` s are instantiated: the shipped components and what the user allows.

The attack of issue #13: anyone who can write to a shared store edits a run's stored
``config/resolved.yaml`` to ``_target_: logging.FileHandler, filename: VICTIM, mode: w``, and every
``ragexp reproduce`` of that run truncated VICTIM. Now reproduce refuses it, naming the target and
how to allow one, and VICTIM is untouched; a user's own retriever runs once registered
as a ``ragexp.components`` entry point.
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
from omegaconf import OmegaConf

from ragexp.config import targets
from ragexp.config.targets import RENAMED, check_component
from ragexp.config.run_config import parse_run_config
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
                           "a registered component class"), line
    assert "ragexp.components" in line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert len(job_runs(db)[2]) == 1  # no reproduction logged

    # the same through a nested node, and through an allowed module's import of another one
    for retrieval in ({"name": "h", "_target_": "reference_pipelines.hybrid.HybridRetriever",
                       "retrievers": [{"_target_": "logging.FileHandler", "filename": str(victim), "mode": "w"}]},
                      {"name": "x", "_target_": "reference_pipelines.bm25.logging.FileHandler", "filename": str(victim),
                       "mode": "w"}):
        stored.write_text(yaml.safe_dump({**config, "retrieval": retrieval}), encoding="utf-8")
        line = one_error_line(ragexp(tmp_path, "reproduce", run.info.run_id, "--tracking-uri", f"sqlite:///{db}"))
        assert "is not a registered component class" in line and "_target_" in line, line
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


KEYWORD_CHUNKER = '''
from dataclasses import dataclass

from typing import ClassVar

from ragexp.chunking.base import Chunker


@dataclass(frozen=True)
class ParagraphChunker(Chunker):
    """Two chunks per document: its first and second half (by characters)."""

    name: ClassVar[str] = "halves"

    def candidate_spans(self, doc):
        middle = len(doc.text) // 2
        yield 0, middle, doc.title
        yield middle, len(doc.text), doc.title

    def describe(self):
        return "halves"
'''


def install_user_package(root: Path) -> dict:
    """``my_rag_search`` on ``PYTHONPATH`` with a ``ragexp.components`` entry point for its
    retriever and chunker, as ``pip install`` of a package declaring them would leave it."""
    package = root / "user_code"
    package.mkdir()
    (package / "my_rag_search.py").write_text(KEYWORD_RETRIEVER + KEYWORD_CHUNKER, encoding="utf-8")
    info = package / "my_rag_search-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rag-search\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[ragexp.components]\nkeyword = my_rag_search:KeywordRetriever\n"
                                           "paragraph = my_rag_search:ParagraphChunker\n", encoding="utf-8")
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(package), ENV.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_a_users_own_retriever_and_chunker_run_once_registered(tiny_dataset, tmp_path):
    conf = tmp_path / "user_conf" / "retrieval"
    conf.mkdir(parents=True)
    (conf / "keyword.yaml").write_text("name: keyword\n_target_: my_rag_search.KeywordRetriever\nmin_overlap: 1\n", "utf-8")
    db = tmp_path / "mlflow.db"
    args = ["run", "--config-dir", str(tmp_path / "user_conf"), *dataset_args(tiny_dataset, db), "retrieval=keyword",
            "chunking=none", "chunking._target_=my_rag_search.ParagraphChunker"]
    (tmp_path / "unregistered").mkdir()
    (tmp_path / "unregistered" / "my_rag_search.py").write_text(KEYWORD_RETRIEVER, encoding="utf-8")
    unregistered = {**ENV, "PYTHONPATH": str(tmp_path / "unregistered")}

    refused = one_error_line(ragexp(tmp_path, *args, env=unregistered))
    assert "_target_ 'my_rag_search.ParagraphChunker' is not a registered component class" in refused, refused
    assert not db.exists() or not job_runs(db)[2]

    registered = ragexp(tmp_path, *args, env=install_user_package(tmp_path))
    assert registered.returncode == 0, registered.stderr[-3000:]
    _, _, (run,) = job_runs(db)
    assert run.info.status == "FINISHED" and run.data.params["retrieval._target_"] == "my_rag_search.KeywordRetriever"
    assert run.data.params["chunking._target_"] == "my_rag_search.ParagraphChunker"
    assert results_view(run.data.metrics, run.data.params)["hit_rate_at_10"] > 0  # it really retrieved


def test_every_nested_target_is_checked_before_any_import(monkeypatch):
    shipped = {"_target_": "reference_pipelines.hybrid.HybridRetriever",
               "retrievers": [{"_target_": "reference_pipelines.bm25.BM25Retriever"},
                              {"_target_": "reference_pipelines.dense.DenseRetriever",
                               "encoder": {"_target_": "reference_pipelines.encoders.Embedding", "model": "minilm"}}]}
    check_component(shipped, "retrieval")  # the shipped configs pass
    hostile = {**shipped, "retrievers": [*shipped["retrievers"], {"_target_": "os.system", "command": "true"}]}
    with pytest.raises(RagexpInputError, match="'os.system' is not a registered component class") as caught:
        check_component(hostile, "retrieval")
    assert caught.value.field == "retrieval.retrievers[2]._target_"
    imported = []
    monkeypatch.setattr("hydra.utils.get_object", lambda name: imported.append(name))
    for name in ("reference_pipelines_evil.Retriever", "ragexp.cli.main", "ragexp.tracking.run_logger.save_local",
                 "builtins.exec", "reference_pipelines.dense.faiss_threads", "ragexp.judging.calibration.write_labels"):
        with pytest.raises(RagexpInputError, match="not a registered component class"):
            check_component({"_target_": name}, "reranker")
    assert imported == []  # refused by name: nothing unregistered was imported


#: Issue #24 case 1 and its variants: functions, methods and classes inside the packages the old
#: module-prefix allow-list let through, each in another shipped package.
FUNCTIONS_IN_SHIPPED_PACKAGES = [
    "ragexp.judging.calibration.labels.write_labels",  # overwrote a file with attacker text
    "ragexp.judging.calibration.record.JudgeCalibration.save",  # a method
    "ragexp.judging.calibration.labels.LabelledClaim",  # a class, but not a component
    "ragexp.llm.chat_models.build_chat_model",  # a factory function in ragexp.llm
    "ragexp.llm.call_cache.CallCache",
    "reference_pipelines.dense.faiss_threads",  # a function in reference_pipelines
    "reference_pipelines.bm25.np.save",  # reaching NumPy through a shipped module
    "reference_pipelines.bm25.logging.FileHandler",
    "ragexp.chunking.base.Chunker.from_options",  # a classmethod of a registered package
    "ragexp.tracking.run_logger.save_local",
]


@pytest.mark.parametrize("target", FUNCTIONS_IN_SHIPPED_PACKAGES)
def test_functions_methods_and_other_classes_of_shipped_packages_are_refused(target):
    with pytest.raises(RagexpInputError, match="is not a registered component class") as caught:
        check_component({"name": "x", "_target_": target, "path": "/tmp/victim"}, "retrieval")
    assert caught.value.field == "retrieval._target_"


def test_a_factory_function_is_no_target_not_even_the_encoder_factory():
    """Issue #24: a function in the allow-list is what a stored config must never name; the
    embedding group builds the component class ``Embedding`` instead of ``make_encoder``."""
    for target in ("reference_pipelines.encoders.make_encoder", "ragexp.models.encoders.make_encoder",
                   "reference_pipelines.encoders.build_encoder"):
        expected = "was replaced by the component class 'reference_pipelines.encoders.Embedding'" if target in RENAMED \
            else "is not a registered component class"
        with pytest.raises(RagexpInputError, match=expected) as caught:
            check_component({"_target_": target, "model": "minilm"}, "embedding")
        assert caught.value.field == "embedding._target_"
    check_component({"_target_": "reference_pipelines.encoders.Embedding", "model": "minilm", "backend": "torch"}, "embedding")
    with pytest.raises(RagexpInputError, match="unknown parameter of Embedding") as caught:
        check_component({"_target_": "reference_pipelines.encoders.Embedding", "model": "minilm", "graph": "/x.onnx"},
                        "embedding")
    assert caught.value.field == "embedding.graph"


def test_the_removed_prefix_allow_list_is_ignored_and_named(monkeypatch):
    monkeypatch.setenv("RAGEXP_ALLOWED_TARGETS", "my_rag,ragexp")
    with pytest.raises(RagexpInputError, match=r"RAGEXP_ALLOWED_TARGETS \(set here\) was removed"):
        check_component({"_target_": "ragexp.judging.calibration.labels.write_labels"}, "retrieval")
    monkeypatch.delenv("RAGEXP_ALLOWED_TARGETS")
    with pytest.raises(RagexpInputError) as caught:
        check_component({"_target_": "my_rag.Retriever"}, "retrieval")
    assert "RAGEXP_ALLOWED_TARGETS" not in caught.value.message


@pytest.mark.parametrize("target", sorted(targets.SHIPPED))
def test_every_shipped_name_is_a_class_defined_under_that_name(target):
    assert isinstance(targets.component_class(target, "x"), type)


def test_a_registered_name_must_resolve_to_a_class_defined_under_it(monkeypatch):
    monkeypatch.setattr(targets, "registered_entry_points", lambda: frozenset({"os.path.join", "json.decoder.JSONDecoder",
                                                                               "json.JSONDecoder"}))
    with pytest.raises(RagexpInputError, match="is not a class defined under that name"):
        check_component({"_target_": "os.path.join"}, "retrieval")  # a function, even registered
    with pytest.raises(RagexpInputError, match="is not a class defined under that name"):
        check_component({"_target_": "json.JSONDecoder"}, "retrieval")  # re-exported: defined in json.decoder
    check_component({"_target_": "json.decoder.JSONDecoder", "strict": False}, "retrieval")


@pytest.mark.parametrize("key", ["_partial_", "_args_", "_recursive_", "_convert_"])
def test_hydra_call_keys_are_refused_at_any_depth(key):
    for node, field in (({"_target_": "reference_pipelines.bm25.BM25Retriever", key: True}, f"retrieval.{key}"),
                        ({"_target_": "reference_pipelines.hybrid.HybridRetriever",
                          "retrievers": [{"_target_": "reference_pipelines.bm25.BM25Retriever", key: ["x"]}]},
                         f"retrieval.retrievers[0].{key}")):
        with pytest.raises(RagexpInputError, match="not allowed in a config") as caught:
            check_component(node, "retrieval")
        assert caught.value.field == field


def test_a_block_is_checked_against_its_class_schema():
    with pytest.raises(RagexpInputError, match="unknown parameter of BM25Retriever; its parameters: variant, k1") as caught:
        check_component({"_target_": "reference_pipelines.bm25.BM25Retriever", "path": "/tmp/x"}, "retrieval")
    assert caught.value.field == "retrieval.path"
    with pytest.raises(RagexpInputError, match="must be a number") as caught:
        check_component({"_target_": "reference_pipelines.bm25.BM25Retriever", "k1": "1.2"}, "retrieval")
    assert caught.value.field == "retrieval.k1"
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(RagexpInputError, match="must be a finite number") as caught:
            check_component({"_target_": "reference_pipelines.bm25.BM25Retriever", "k1": bad}, "retrieval")
        assert caught.value.field == "retrieval.k1"
    with pytest.raises(RagexpInputError) as caught:
        check_component({"_target_": "ragexp.judging.judges.LexicalJudge", "threshold": float("nan")}, "judge")
    assert caught.value.field == "judge.threshold"


def test_entry_points_register_exact_classes(monkeypatch):
    with pytest.raises(RagexpInputError):
        check_component({"_target_": "fractions.Fraction"}, "retrieval")
    entry = EntryPoint(name="fraction", value="fractions:Fraction", group=targets.ENTRY_POINT_GROUP)
    monkeypatch.setattr(targets, "entry_points", lambda group: [entry] if group == targets.ENTRY_POINT_GROUP else [])
    targets.registered_entry_points.cache_clear()
    try:
        check_component({"_target_": "fractions.Fraction"}, "retrieval")
        with pytest.raises(RagexpInputError):
            check_component({"_target_": "fractions.Decimal"}, "retrieval")  # only the registered class
    finally:
        targets.registered_entry_points.cache_clear()


def test_the_shipped_configs_name_only_registered_classes():
    conf = Path(__file__).resolve().parents[1] / "conf"
    files = list(conf.rglob("*.yaml"))
    for file in files:
        node = {k: v for k, v in (yaml.safe_load(file.read_text(encoding="utf-8")) or {}).items() if k != "defaults"}
        check_component(node.get("hydra", node), f"{file.parent.name}/{file.stem}")
    assert sum("_target_:" in file.read_text(encoding="utf-8") for file in files) >= 24  # chunkers and loaders too


def test_a_saved_config_of_an_earlier_release_is_read_with_the_class_that_replaced_its_factory(tmp_path, capsys):
    """Runs saved before 2026-12-04 name ``make_encoder`` wherever an encoder is built; a saved
    config is read with ``Embedding`` in each place (said on stderr), then checked as any other."""
    saved = tmp_path / "resolved.yaml"
    factory = "reference_pipelines.encoders.make_encoder"
    saved.write_text(yaml.safe_dump({
        "embedding": {"_target_": factory, "model": "minilm"},
        "reranker": {"name": "embedding", "_target_": "reference_pipelines.rerank.EmbeddingReranker",
                     "encoder": {"_target_": factory, "model": "paraphrase-minilm-l3"}},
    }), encoding="utf-8")
    cfg = parse_run_config(saved)
    assert cfg.embedding._target_ == cfg.reranker.encoder._target_ == "reference_pipelines.encoders.Embedding"
    notes = capsys.readouterr().err.splitlines()
    assert [n.split(": ", 2)[2] for n in notes] == [
        f"embedding._target_: {factory} -> reference_pipelines.encoders.Embedding (a run saved by an earlier release)",
        f"reranker.encoder._target_: {factory} -> reference_pipelines.encoders.Embedding (a run saved by an earlier release)",
    ]
    check_component(OmegaConf.to_container(cfg.embedding), "embedding")
