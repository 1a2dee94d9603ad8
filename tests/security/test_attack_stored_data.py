"""Attacks by a hostile colleague with write access to a shared store or a handed-over folder
(issue #30, classes 1, 2, 3, 5, 6 and 7; class 4, the pages, is test_attack_pages.py; class 7's
commands, export, gate and annotate --from-run, are also in tests/test_results_file.py). Each test
makes the attack and asserts that it fails safe: one refusal naming the file or field, the victim
untouched, nothing sent, nothing read to exhaustion.

Fails before (main at ``bb829d7``, before the gate): class 1, the second ``# @package`` header
truncated the victim with exit 0; class 2, this machine's MLflow credentials reached the store's
artifact server; class 3, the nested resolvers passed the ``${oc.env:`` scan and the overrides file
was not checked at all (the gate's functions did not exist there either); class 5, an empty file
became a SQLite store; class 6, the alias bomb and ``/dev/zero`` grew memory without bound, a
FIFO blocked, ``/usr/lib`` was hashed whole, the sparse file and the DOCX ended in MemoryError;
class 7, ``ranking: "notalist"`` was loaded untyped (tracebacks later), 2,000 levels raised
RecursionError, a FIFO as results file blocked (the test then fails by pytest's timeout).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ragexp.errors import RagexpInputError
from tests.helpers.bad_input_cases import ENV

VICTIM_TEXT = "do not overwrite me\n"


def ragexp(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env={**ENV, **(env or {})})


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


# --- 1. Hydra settings from a hand-given folder ------------------------------------------------------------


def test_class1_a_second_package_header_sets_no_hydra_callback(tmp_path):
    """ragexp read the first header, Hydra the last: the FileHandler truncated VICTIM, exit 0."""
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    folder = tmp_path / "handed"
    (folder / "evil").mkdir(parents=True)
    (folder / "resolved.yaml").write_text("defaults:\n  - evil: x\n  - _self_\n", encoding="utf-8")
    (folder / "evil" / "x.yaml").write_text(
        "# @package _group_\n# @package hydra\ncallbacks:\n  e:\n    _target_: logging.FileHandler\n"
        f"    filename: {victim}\n    mode: w\n", encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved"))
    assert f"{folder}/resolved.yaml: field 'defaults'" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handed", "victim.txt"]


def test_class1_nothing_beside_a_saved_config_reaches_hydra(tmp_path):
    """Group folders reached through a symbolic link were never scanned: now Hydra is pointed at a
    fresh folder holding only the gated copy of the saved values."""
    from ragexp.config.command_line import parse_run_command_line
    from ragexp.config.untrusted import gated_primary_config

    folder = tmp_path / "handed"
    folder.mkdir()
    (tmp_path / "elsewhere" / "hydra" / "callbacks").mkdir(parents=True)
    (folder / "evil").symlink_to(tmp_path / "elsewhere")
    (folder / "resolved.yaml").write_text("# @package hydra\nretrieval: {name: bm25}\n", encoding="utf-8")
    command = parse_run_command_line(["--config-path", str(folder), "--config-name", "resolved", "+evil=x"])
    with gated_primary_config(command) as gated_command:
        gated = gated_command.config_path
        assert [p.name for p in gated.iterdir()] == ["resolved.yaml"] and gated_command.overrides == ("+evil=x",)
        assert "@package" not in (gated / "resolved.yaml").read_text(encoding="utf-8")


# --- 2. this machine's MLflow credentials sent where stored data points -----------------------------------


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append(self.headers.get("Authorization") or "")
        self.send_response(404)
        self.end_headers()

    do_PUT = do_POST = do_GET  # noqa: N815

    def log_message(self, *args):  # noqa: ANN002 - silence
        pass


@pytest.fixture()
def attacker():
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    server.shutdown()


CREDENTIALS = {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "s3cret-pw", "MLFLOW_TRACKING_TOKEN": ""}


def _store_with_a_foreign_artifact_location(tmp_path: Path, location: str) -> tuple[str, str]:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("shared", artifact_location=location)
    return uri, client.create_run(experiment).info.run_id


def test_class2_a_stored_artifact_location_gets_no_credentials(tmp_path, attacker):
    url, seen = attacker
    uri, run_id = _store_with_a_foreign_artifact_location(tmp_path, f"{url}/artifacts")
    line = one_error_line(ragexp(tmp_path, "reproduce", run_id, "--tracking-uri", uri, env=CREDENTIALS))
    assert f"keeps its artifacts at {url}/artifacts/" in line and "field 'artifact_location'" in line, line
    time.sleep(0.2)
    assert seen == []  # not one request, so no Authorization header either
    assert base64.b64encode(b"alice:s3cret-pw").decode() not in "".join(seen)


def test_class2_artifacts_stay_on_the_tracking_server_or_this_machine():
    from ragexp.tracking.store import check_artifact_location

    for location, tracking in (("/srv/mlruns/1", "sqlite:///m.db"), ("file:///srv/mlruns/1", "sqlite:///m.db"),
                               ("mlflow-artifacts:/1", "http://mlflow:5000"),
                               ("mlflow-artifacts://mlflow:5000/1", "http://mlflow:5000"),
                               ("http://mlflow:5000/api/2.0/mlflow-artifacts/artifacts/1", "http://mlflow:5000")):
        check_artifact_location(location, tracking, "experiment 'x'")
    for location, tracking in (("http://127.0.0.1:9/x", "sqlite:///m.db"), ("https://evil.example/x", "http://mlflow:5000"),
                               ("mlflow-artifacts://evil:5000/1", "http://mlflow:5000"), ("s3://bucket/x", "http://mlflow:5000"),
                               ("http://mlflow:5001/x", "http://mlflow:5000")):
        with pytest.raises(RagexpInputError, match="MLFLOW_TRACKING_"):
            check_artifact_location(location, tracking, "experiment 'x'")


def test_class2_a_handed_tracking_uri_is_replaced_by_this_machines(tmp_path, monkeypatch):
    from ragexp.evaluation.saved_config import read_run_config

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///here.db")
    saved = tmp_path / "resolved.yaml"
    saved.write_text("dataset: {_target_: ragexp.data.dataset.DemoDataset, name: demo}\n"
                     "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n"
                     "tracking: {uri: 'http://127.0.0.1:9'}\ncache_dir: /etc\n", encoding="utf-8")
    cfg = read_run_config(saved, tracking_uri="sqlite:///here.db", cache_dir=str(tmp_path / "cache")).config
    assert cfg.tracking.uri == "sqlite:///here.db" and cfg.cache_dir == str(tmp_path / "cache")


# --- 3. this machine's environment into the store ----------------------------------------------------------


@pytest.mark.parametrize("value", ['${oc.decode:"\\${oc.${oc.select:nokey,env}:LEAKY}"}', "${oc.env:LEAKY}",
                                   "x-${env:LEAKY}", "\\${oc.env:LEAKY}"])
def test_class3_no_stored_value_is_interpolated(tmp_path, value, monkeypatch):
    from ragexp.config.run_config import parse_run_config, read_overrides

    monkeypatch.setenv("LEAKY", "plainleaky")
    saved = tmp_path / "resolved.yaml"
    saved.write_text(f"tracking:\n  note: '{value}'\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="no interpolation") as caught:
        parse_run_config(saved)
    assert caught.value.field == "tracking.note" and "plainleaky" not in str(caught.value)
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text(f"- 'tracking.note={value}'\n", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="no interpolation"):
        read_overrides(overrides)


# --- 5. a store value names a file to overwrite --------------------------------------------------------------


def test_class5_an_existing_file_never_becomes_a_store(tmp_path):
    from ragexp.tracking import store

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    with pytest.raises(RagexpInputError, match="is not a sqlite database"):
        store.connect(f"sqlite:///{package / '__init__.py'}")
    assert (package / "__init__.py").read_bytes() == b"" and sorted(os.listdir(package)) == ["__init__.py"]


# --- 6. resources ---------------------------------------------------------------------------------------------


def test_class6_an_alias_bomb_is_refused_at_once(tmp_path):
    from ragexp.config.run_config import parse_run_config

    saved = tmp_path / "resolved.yaml"
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    saved.write_text("tracking:\n  note:\n" + "".join(f"    {line}\n" for line in levels), encoding="utf-8")
    assert len(saved.read_bytes()) < 600
    started = time.perf_counter()
    with pytest.raises(RagexpInputError, match="YAML aliases"):
        parse_run_config(saved)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_class6_a_calibration_that_is_no_file_is_one_line(tmp_path, kind):
    from ragexp.evaluation.checks import check_path_fields

    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "pipe", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(RagexpInputError) as caught:
        check_path_fields({"judge": {"calibration": str(path)}})
    assert caught.value.field == "judge.calibration" and ("not a regular file" in str(caught.value) or "folder" in str(caught.value))


def test_class6_a_folder_that_is_no_model_is_refused_before_hashing(tmp_path, monkeypatch):
    from ragexp.models import resolve

    hashed = []
    monkeypatch.setattr(resolve, "weights_digest", lambda path: hashed.append(path) or "x")
    (tmp_path / "weights.bin").write_bytes(b"0" * 1024)
    with pytest.raises(RagexpInputError, match="does not look like a model"):
        resolve.model_identity(resolve.resolve_model(str(tmp_path)))
    assert hashed == []


def test_class6_a_sparse_document_and_a_docx_bomb_are_bounded(tmp_path):
    from ragexp.data.convert.base import ConvertOptions, Unconvertible
    from ragexp.data.convert.docx import convert_docx
    from ragexp.data.loaders.corpus import load_corpus

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    with open(tmp_path / "corpus" / "huge.md", "wb") as handle:
        handle.truncate(1500 * 2**20)
    with pytest.raises(RagexpInputError, match="1,572,864,000 bytes"):
        load_corpus(tmp_path / "corpus")
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b" " * (200 * 2**20))
    assert bomb.stat().st_size < 2**20
    with pytest.raises(Unconvertible, match="ZIP bomb"):
        convert_docx(bomb.read_bytes(), ConvertOptions())


# --- 7. stored results -----------------------------------------------------------------------------------------


RESULTS_ATTACKS = {
    "ranking-not-a-list": ('{"format": "ragexp-results/1", "meta": {}, "aggregates": {}, "per_query": '
                           '[{"query_id": "q1", "ranking": "notalist"}]}', "per_query[0].ranking"),
    "nested-2000": ('{"format": "ragexp-results/1", "meta": ' + "[" * 2000 + "]" * 2000 + "}", "nested more than"),
    "huge-integer": ('{"format": "ragexp-results/1", "meta": {"n": ' + "9" * 400 + "}}", "out of range"),
    "key-twice": ('{"format": "ragexp-results/1", "meta": {}, "meta": {}}', "appears twice"),
}


@pytest.mark.parametrize("attack", RESULTS_ATTACKS, ids=list(RESULTS_ATTACKS))
def test_class7_stored_results_are_refused_in_one_line(tmp_path, attack):
    from ragexp.evaluation.results import RunResults

    text, words = RESULTS_ATTACKS[attack]
    path = tmp_path / "ragexp_results.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RagexpInputError) as caught:
        RunResults.load(path)
    assert str(caught.value).startswith(str(path)) and words in str(caught.value), str(caught.value)


def test_class7_a_results_path_that_is_no_file_is_refused(tmp_path):
    from ragexp.evaluation.results import RunResults

    os.mkfifo(tmp_path / "pipe.json")
    for path, words in ((tmp_path / "pipe.json", "not a regular file"), (tmp_path, "is a folder")):
        with pytest.raises(RagexpInputError, match=words):
            RunResults.load(path)


# --- bad input that left things behind ------------------------------------------------------------------------


def test_an_interrupted_reproduce_removes_its_temporary_folders(tmp_path, monkeypatch):
    """SIGTERM during a reproduction (its handler raises :class:`Interrupted`): the stored config,
    cache and output folders go, the command says so in one line and exits 128 + 15."""
    import argparse
    import signal
    import tempfile
    from types import SimpleNamespace

    from ragexp.commands import reproduce
    from ragexp.runtime.interrupt import Interrupted

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(reproduce, "client_for", lambda args: (None, "sqlite:///unused.db"))
    monkeypatch.setattr(reproduce, "get_run", lambda client, run_id: SimpleNamespace(info=SimpleNamespace(run_id=run_id)))
    monkeypatch.setattr(reproduce.interrupt, "install", lambda *signums: None)  # the test runner keeps its own

    def interrupted(original, uri, work, args):
        (work / "stored").mkdir()
        (work / "stored" / "resolved.yaml").write_text("retrieval: {}\n", encoding="utf-8")
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(reproduce, "reproduce_run", interrupted)
    args = argparse.Namespace(run_id="f" * 32, tracking_uri=None)
    assert reproduce.run(args) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
