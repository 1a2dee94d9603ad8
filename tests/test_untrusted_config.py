"""Issue #24: a shared store is untrusted input. The hostile colleague's cases, through the real CLI.

Whoever can write to a shared store can edit a run's stored ``config/resolved.yaml``; whoever hands
over a folder can edit its ``resolved.yaml`` before ``ragexp run --config-path``. Each test makes
the edit and asserts that ragexp refuses it in one line with exit code 2, that the victim file is
untouched, that no request reached a foreign endpoint and that nothing was written.

Fails before: all 45 fail on the pre-trust main (``ee569b6^1``, run with this file and its
``ragexp`` on ``PYTHONPATH``; Hydra's flags moved before the overrides, as that CLI wanted). 35
because the attack worked there (a callable built, a FileHandler callback truncating the victim,
a key sent to the attacker's server, a secret in folder names, params or logs, a temporary folder
or shared output folder left). 5 were refused there too and fail only on the message: the old
prefix allow-list (nested FileHandler), Hydra itself (a ``launcher`` key, two URLs its override
grammar rejects) and a TypeError (``JudgeCalibration.save`` without ``self``). 5 do not fit the
pre-trust API, so they prove nothing there: ``LabelledClaim`` took ``human_label`` (the two
``write_labels`` payloads), chunkers and loaders had no ``_target_``, ``tracking.note`` did not
exist (upload, sweep checks). On main before the package/environment fixes, the 4
``PRIMARY_HYDRA_FROM_ENV`` cases already passed; the 7 others added with them and the
``make_encoder`` one failed. (That one now asserts that a saved ``make_encoder`` is read as the
class ``Embedding`` and checked against it, so runs saved before the change still reproduce.)
Since the gate of #30 a hand-given ``--config-path`` config is read as data (its refusals name
the gate's reasons), while ``hydra.*`` typed on the command line and a ``--config-dir`` folder are
the operator's code (docs/scale.md): the cases that refused those are gone.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from tests.helpers.cli import ENV, dataset_args, job_runs
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok
from tests.helpers.tiny_dataset import write_tiny_dataset

pytestmark = pytest.mark.slow
VICTIM_TEXT = "do not overwrite me\n"
SECRET = "sk-ragexp-TEST-9a1b2c3d4e5f60718293"


def ragexp(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    tmpdir = cwd / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, check=False, env={**ENV, "TMPDIR": str(tmpdir), **(env or {})})


#: What the libraries under a run leave in $TMPDIR by themselves when a model is first exported on
#: a cold cache: torch's inductor cache folder and ONNX Runtime's session-id file. Never ragexp's.
LIBRARY_TEMP_FILES = {f"torchinductor_{getpass.getuser()}", ".ses"}


def left_in_tmpdir(cwd: Path) -> list[str]:
    """What ragexp left in the temporary folder of :func:`ragexp` calls (nothing, when it cleans up)."""
    return sorted(p.name for p in (cwd / "tmpdir").iterdir() if p.name not in LIBRARY_TEMP_FILES)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """One logged run whose stored ``config/resolved.yaml`` the tests edit (restored after each)."""
    root = tmp_path_factory.mktemp("store")
    dataset = write_tiny_dataset(root)
    db = root / "mlflow.db"
    proc = ragexp(root, "run", *dataset_args(dataset, db), "retrieval=bm25", "eval.bootstrap_resamples=50")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, _, (run,) = job_runs(db)
    assert run.data.tags["ragexp.config_source"] == "composed"  # a run composed from this machine's conf/
    stored = Path(unquote(urlparse(client.get_run(run.info.run_id).info.artifact_uri).path)) / "config" / "resolved.yaml"
    return root, db, run.info.run_id, stored, stored.read_text(encoding="utf-8")


@pytest.fixture()
def store(stored_run, tmp_path):
    root, db, run_id, stored, original = stored_run
    yield root, db, run_id, stored, yaml.safe_load(original)
    stored.write_text(original, encoding="utf-8")


def reproduce(store, tmp_path: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    _, db, run_id, _, _ = store
    return ragexp(tmp_path, "reproduce", run_id, "--tracking-uri", f"sqlite:///{db}", *extra, env=env)


def store_config(store, config: dict) -> None:
    store[3].write_text(yaml.safe_dump(config), encoding="utf-8")


def run_count(store) -> int:
    return len(job_runs(store[1])[2])


# --- 1. a function, method or other class inside an allowed package is not a component ----------------


def _write_labels_attack(victim: Path) -> dict:
    return {"name": "bm25", "_target_": "ragexp.judging.calibration.labels.write_labels", "path": str(victim),
            "rows": [{"_target_": "ragexp.judging.calibration.labels.LabelledClaim", "id": "touch X;#",
                      "claim": "c", "context": "x", "label": "supported"}]}


ATTACKS = {
    "write-labels": _write_labels_attack,
    "calibration-save": lambda victim: {"name": "x", "_target_": "ragexp.judging.calibration.record.JudgeCalibration.save",
                                        "path": str(victim)},
    "function-in-reference-pipelines": lambda victim: {"name": "x", "_target_": "reference_pipelines.dense.faiss_threads"},
    "partial": lambda victim: {"name": "bm25", "_target_": "reference_pipelines.bm25.BM25Retriever", "_partial_": True},
    "args": lambda victim: {"name": "bm25", "_target_": "reference_pipelines.bm25.BM25Retriever", "_args_": ["okapi"]},
    "file-handler-nested": lambda victim: {"name": "h", "_target_": "reference_pipelines.hybrid.HybridRetriever",
                                           "retrievers": [{"_target_": "logging.FileHandler", "filename": str(victim),
                                                           "mode": "w"}]},
}


@pytest.mark.parametrize("attack", ATTACKS, ids=list(ATTACKS))
def test_reproduce_builds_only_registered_component_classes(store, tmp_path, attack):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    store_config(store, {**store[4], "retrieval": ATTACKS[attack](victim)})
    line = one_error_line(reproduce(store, tmp_path))
    assert line.startswith("ragexp reproduce: error: field 'retrieval"), line
    assert ("not a registered component class" in line) or ("not allowed in a config" in line), line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert run_count(store) == 1  # no reproduction logged
    assert left_in_tmpdir(tmp_path) == []  # no temporary folder left, none with the config


def test_a_chunker_or_loader_target_is_checked_like_a_pipeline(store, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    for group, node in (("chunking", {**store[4]["chunking"], "_target_": "logging.FileHandler"}),
                        ("dataset", {**store[4]["dataset"], "_target_": "ragexp.judging.calibration.labels.write_labels"})):
        store_config(store, {**store[4], group: node})
        line = one_error_line(reproduce(store, tmp_path))
        assert f"field '{group}._target_'" in line and "not a registered component class" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT


def test_reproduce_reads_the_encoder_factory_of_earlier_releases_as_the_class_that_replaced_it(store, tmp_path):
    """``make_encoder`` was the one function the registry let through; the embedding group builds
    the class ``Embedding`` now. A stored config naming the function (every run saved before
    2026-12-04) is read with the class, said on stderr, and checked against the class: the
    function's extra parameters (``cache``, any ``**options``) are refused, so nothing reaches it
    that the class does not take."""
    factory = {**store[4]["embedding"], "_target_": "reference_pipelines.encoders.make_encoder"}
    store_config(store, {**store[4], "embedding": factory})
    proc = reproduce(store, tmp_path, "--no-log")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("embedding._target_: reference_pipelines.encoders.make_encoder -> reference_pipelines.encoders.Embedding"
            in proc.stderr), proc.stderr[-3000:]
    store_config(store, {**store[4], "embedding": {**factory, "cache": "/tmp/elsewhere"}})
    refused = reproduce(store, tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("ragexp reproduce: error")]
    assert len(errors) == 1 and "field 'embedding.cache'" in errors[0] and "unknown parameter of Embedding" in errors[0], \
        refused.stderr[-3000:]
    assert run_count(store) == 1


def hand_folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "handed"
    folder.mkdir(exist_ok=True)
    (folder / "resolved.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return folder


def test_config_path_run_builds_only_registered_classes(store, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    folder = hand_folder(tmp_path, {**store[4], "retrieval": _write_labels_attack(victim)})
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved"))
    assert "field 'retrieval._target_'" in line and "not a registered component class" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert not (tmp_path / "outputs").exists()


def test_a_hand_given_config_runs_with_this_machines_folders_and_sweep_parent(store, tmp_path):
    """A saved ``resolved.yaml`` holds no ``hydra:`` node, and Hydra takes its settings from the
    primary config: run by hand it would land in Hydra's own ``outputs/DATE/TIME`` (three runs
    started together, one folder) and a ``-m`` sweep would have no parent run. It gets this
    machine's settings instead. A group choice (``retrieval=bm25``) does not apply to it: one line."""
    folder = hand_folder(tmp_path, store[4])
    db = tmp_path / "hand.db"
    args = [sys.executable, "-m", "ragexp.cli", "run", "--config-path", str(folder), "--config-name", "resolved",
            f"tracking.uri=sqlite:///{db}", f"cache_dir={tmp_path / 'cache'}"]
    procs = [subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-3000:]
    assert len(list(tmp_path.glob("outputs/*/*"))) == 3
    swept = subprocess.run([*args[:4], "-m", *args[4:], "retrieval.k1=1.2,0.9"], cwd=tmp_path, env=ENV, capture_output=True,
                           text=True)
    assert swept.returncode == 0, swept.stderr[-3000:]
    _, parents, children = job_runs(db)
    assert len(parents) == 1 and len(children) == 5
    assert [c.data.tags.get("mlflow.parentRunId") for c in children].count(parents[0].info.run_id) == 2
    assert {c.data.tags.get("ragexp.config_source") for c in children} == {"config_path"}  # where each came from
    line = one_error_line(subprocess.run([*args, "retrieval=bm25"], cwd=tmp_path, env=ENV, capture_output=True, text=True))
    assert "field 'retrieval'" in line and "does not apply to a hand-given config" in line, line


# --- 2. hydra.* from a hand-given config -------------------------------------------------------------------


HYDRA_EDITS = {
    "callbacks": lambda victim: {"callbacks": {"evil": {"_target_": "logging.FileHandler", "filename": str(victim),
                                                         "mode": "w"}}},
    "run-dir": lambda victim: {"run": {"dir": str(victim.parent / "elsewhere")}},
    "job-name": lambda victim: {"job": {"name": "${oc.env:HOME}"}},
    "launcher": lambda victim: {"launcher": {"_target_": "logging.FileHandler", "filename": str(victim)}},
    "job-env": lambda victim: {"job": {"env_set": {"LD_PRELOAD": str(victim)}}},
}


@pytest.mark.parametrize("edit", HYDRA_EDITS, ids=list(HYDRA_EDITS))
def test_hydra_settings_in_a_hand_given_config_are_refused(store, tmp_path, edit):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    folder = hand_folder(tmp_path, {**store[4], "hydra": HYDRA_EDITS[edit](victim)})
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved"))
    assert f"{folder}/resolved.yaml: field 'hydra." in line and "come from this machine" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handed", "tmpdir", "victim.txt"]


def test_hydra_options_picked_by_a_hand_given_defaults_list_are_refused(store, tmp_path):
    """A saved config has no defaults list (a ``--config-dir`` folder of groups is code the user chose: docs/scale.md)."""
    folder = hand_folder(tmp_path, {"defaults": [{"override hydra/launcher": "basic"}, "_self_"], **store[4]})
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved"))
    assert "field 'defaults'" in line and "hydra/" in line, line


#: The primary config's own ``hydra:`` node reading this machine's environment: the value Hydra
#: would write (folder names, ``.hydra/hydra.yaml``, log file names) is the secret.
PRIMARY_HYDRA_FROM_ENV = {
    "run-dir": {"run": {"dir": "out/${oc.env:AWS_SECRET_ACCESS_KEY}"}},
    "job-name": {"job": {"name": "${oc.env:AWS_SECRET_ACCESS_KEY}"}},
    "sweep-dir": {"sweep": {"dir": "sweeps/${oc.env:AWS_SECRET_ACCESS_KEY}"}},
    "job-name-other-variable": {"job": {"name": "${oc.env:GITHUB_TOKEN,none}"}},
}


@pytest.mark.parametrize("edit", PRIMARY_HYDRA_FROM_ENV, ids=list(PRIMARY_HYDRA_FROM_ENV))
def test_the_primary_configs_hydra_node_reading_the_environment_is_refused(store, tmp_path, edit):
    folder = hand_folder(tmp_path, {**store[4], "hydra": PRIMARY_HYDRA_FROM_ENV[edit]})
    sweep = ["-m", "retrieval.k1=1.2,1.5"] if edit == "sweep-dir" else []
    env = {"AWS_SECRET_ACCESS_KEY": SECRET + "aws", "GITHUB_TOKEN": "ghp_" + "a1b2c3d4" * 5}
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved", *sweep, env=env))
    assert f"{folder}/resolved.yaml: field 'hydra." in line and SECRET not in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handed", "tmpdir"]
    assert _files_containing(tmp_path, SECRET) == [] and _files_containing(tmp_path, "a1b2c3d4") == []


#: Config files that put values into Hydra's node without a ``hydra:`` key: a package in the
#: defaults list, a ``# @package`` header, a group loaded from a hidden folder (``VICTIM`` is replaced).
FILE_HANDLER = "cb:\n  _target_: logging.FileHandler\n  filename: VICTIM\n  mode: w\n"
HYDRA_BY_PACKAGE = {
    "defaults-package-callbacks": ({"evil@hydra.callbacks": "x"}, {"evil/x.yaml": FILE_HANDLER}),
    "defaults-global-package-job-name": ({"evil@_global_.hydra.job": "x"}, {"evil/x.yaml": "name: ${oc.env:LEAKY}\n"}),
    "header-callbacks": ({"evil": "x"}, {"evil/x.yaml": "# @package hydra.callbacks\n" + FILE_HANDLER}),
    "header-run-dir": ({"evil": "x"}, {"evil/x.yaml": "# @package hydra\nrun:\n  dir: out-${oc.env:LEAKY}\n"}),
    "hidden-folder-callbacks": ({".evil": "x"}, {".evil/x.yaml": "# @package hydra.callbacks\n" + FILE_HANDLER}),
}


@pytest.mark.parametrize("case", HYDRA_BY_PACKAGE, ids=list(HYDRA_BY_PACKAGE))
def test_hydra_settings_put_in_place_by_a_package_are_refused(store, tmp_path, case):
    """Each of these built ``logging.FileHandler`` as a Hydra callback (the victim truncated, exit
    0) or named run folders and log files after an environment variable before the fix."""
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    default, files = HYDRA_BY_PACKAGE[case]
    folder = hand_folder(tmp_path, {"defaults": [default, "_self_"], **store[4]})
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text.replace("VICTIM", str(victim)), encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved",
                                 env={"LEAKY": "plainleaky"}))
    assert "hydra" in line or "hidden folder" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handed", "tmpdir", "victim.txt"]
    assert _files_containing(tmp_path, "plainleaky") == []


def test_a_hand_given_value_reading_the_environment_is_refused(store, tmp_path):
    """Outside ``hydra:`` too: the variable's value would be copied into resolved.yaml and the params."""
    folder = hand_folder(tmp_path, {**store[4], "tracking": {**store[4]["tracking"], "note": "${oc.env:LEAKY}"}})
    line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved",
                                 env={"LEAKY": "plainleaky"}))
    assert "field 'tracking.note'" in line and "environment" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handed", "tmpdir"]
    assert _files_containing(tmp_path, "plainleaky") == []


def test_an_unregistered_target_on_the_command_line_is_refused(tmp_path):
    """A component's ``_target_`` typed on the command line is checked like any other (Hydra's own
    ``hydra.*`` settings typed there are the operator's, like a ``--config-dir`` folder: docs/scale.md)."""
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    for args in (["retrieval._target_=ragexp.judging.calibration.labels.write_labels", f"+retrieval.path={victim}"],
                 ["+retrieval._partial_=true"]):
        line = one_error_line(ragexp(tmp_path, "run", *args))
        assert "not a registered component class" in line or "not allowed" in line, line
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmpdir", "victim.txt"]


# --- 3. endpoints and key variables come from this machine -----------------------------------------------


def _generator(base_url: str, key_env: str | None = "OPENAI_API_KEY") -> dict:
    model = {"backend": "openai", "base_url": base_url, "model": "gpt-4o-mini"}
    if key_env:
        model["api_key_env"] = key_env
    return {"name": "openai", "_target_": "reference_pipelines.generators.llm.LLMGenerator", "model": model,
            "max_new_tokens": 16, "prompt_version": "v1"}


def _endpoint_env(local_base_url: str = "") -> dict:
    """This machine: the key in two variables, ``OPENAI_BASE_URL`` as given ("" = conf/'s default)."""
    return {"OPENAI_API_KEY": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET + "aws", "OPENAI_BASE_URL": local_base_url}


@pytest.mark.parametrize("variant", ["other-host", "ip-for-a-name", "other-key-variable", "default-key-variable"])
def test_reproduce_refuses_a_stored_endpoint_this_machine_does_not_name(store, tmp_path, variant):
    with FakeOpenAIServer() as attacker:
        attacker.script(*[ok("x")] * 50)
        by_name = attacker.base_url.replace("127.0.0.1", "localhost")
        local, generator = {
            "other-host": ("https://api.openai.com/v1", _generator(attacker.base_url)),
            "ip-for-a-name": (by_name, _generator(attacker.base_url)),  # the same server, named by its IP
            "other-key-variable": (attacker.base_url, _generator(attacker.base_url, "AWS_SECRET_ACCESS_KEY")),
            "default-key-variable": ("https://api.openai.com/v1", _generator(attacker.base_url, None)),
        }[variant]
        store_config(store, {**store[4], "generator": generator})
        line = one_error_line(reproduce(store, tmp_path, env=_endpoint_env(local)))
        assert attacker.hits == 0
    assert "field 'generator.model.base_url'" in line and generator["model"]["base_url"] in line, line
    assert f"${generator['model'].get('api_key_env', 'OPENAI_API_KEY')}" in line, line
    assert SECRET not in line and run_count(store) == 1


def test_an_allowed_endpoint_is_called_and_a_hand_given_one_is_checked_too(store, tmp_path):
    with FakeOpenAIServer() as server:
        server.script(*[ok("Failed deliveries are retried for 24 hours.")] * 50)
        env = _endpoint_env("https://api.openai.com/v1")
        store_config(store, {**store[4], "generator": _generator(server.base_url), "eval": {**store[4]["eval"], "context_k": 5}})
        line = one_error_line(reproduce(store, tmp_path, "--no-log", env=env))
        assert "--allow-endpoint" in line and server.hits == 0
        allowed = reproduce(store, tmp_path, "--no-log", "--allow-endpoint", f"{server.base_url}=OPENAI_API_KEY", env=env)
        assert allowed.returncode in (0, 1) and "Traceback" not in allowed.stderr, allowed.stderr[-3000:]
        assert server.hits > 0
        hits = server.hits
        folder = hand_folder(tmp_path, {**store[4], "generator": _generator(server.base_url),
                                        "eval": {**store[4]["eval"], "context_k": 5}})
        line = one_error_line(ragexp(tmp_path, "run", "--config-path", str(folder), "--config-name", "resolved", env=env))
        assert "field 'generator.model.base_url'" in line and server.hits == hits
    assert left_in_tmpdir(tmp_path) == []


# --- 4. secrets through interpolation, key names, URLs, uploads ---------------------------------------------


def _files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


SECRET_ARGS = {
    "sweep-value-from-env": ["-m", "retrieval.k1=1.2,${oc.env:LEAKY}"],
    "run-dir-from-env": ["hydra.run.dir=out/${oc.env:LEAKY}"],
    "job-name-from-env": ["hydra.job.name=${oc.env:LEAKY}"],
    "sweep-dir-from-env": ["-m", "retrieval.k1=1.2,1.5", "hydra.sweep.dir=sweeps/${oc.env:LEAKY}"],
    "key-as-config-key": [f"+dataset.{SECRET}=1"],
    "github-token-as-key": ["+tracking.ghp_abcdefghijklmnopqrstuvwxyz0123=1"],
    "aws-key-as-key": ["+tracking.AKIAABCDEFGHIJKLMNOP=1"],
    "api-key-in-query": ["+tracking.note=https://example.com/v1?api_key=plainvalue123"],
    "token-in-fragment": ["+tracking.note=https://example.com/cb#access_token=plainvalue"],
    "token-as-url-user": ["+tracking.note=https://a1b2c3d4e5f6a7b8c9d0@example.com/v1"],
}


@pytest.mark.parametrize("case", SECRET_ARGS, ids=list(SECRET_ARGS))
def test_a_secret_anywhere_that_would_be_written_is_refused_before_anything_is_written(tmp_path, case):
    (tmp_path / "in").mkdir()
    dataset = write_tiny_dataset(tmp_path / "in")
    db = tmp_path / "mlflow.db"
    proc = ragexp(tmp_path, "run", *dataset_args(dataset, db), "retrieval=bm25", *SECRET_ARGS[case],
                  env={"LEAKY": SECRET})
    line = one_error_line(proc)
    assert "not shown" in line and SECRET not in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "tmpdir"]  # no store, outputs/ or multirun/
    assert _files_containing(tmp_path, "plainvalue") == [] and _files_containing(tmp_path, SECRET) == []


def test_upload_screens_the_folder_like_a_run(store, tmp_path):
    root, db, _, _, config = store
    saved = next(root.glob("outputs/*/*/resolved.yaml")).parent
    folder = tmp_path / "offline"
    subprocess.run(["cp", "-r", str(saved), str(folder)], check=True)
    (folder / "resolved.yaml").write_text(yaml.safe_dump({**config, "tracking": {**config["tracking"],
                                                          "note": f"Bearer {SECRET[3:]}"}}), encoding="utf-8")
    line = one_error_line(ragexp(tmp_path, "upload", str(folder), "--tracking-uri", f"sqlite:///{tmp_path / 'up.db'}"))
    assert "field 'tracking.note'" in line and "not shown" in line, line
    assert not (tmp_path / "up.db").exists()


# --- 5. bad input that left things behind --------------------------------------------------------------------


def test_a_reproduction_is_tagged_as_a_stored_config(store, tmp_path):
    """Where a run's config came from is on the run: a reproduction ran a stored config."""
    before = {run.info.run_id for run in job_runs(store[1])[2]}
    assert reproduce(store, tmp_path).returncode == 0
    client, _, runs = job_runs(store[1])
    (new,) = [run for run in runs if run.info.run_id not in before]
    client.delete_run(new.info.run_id)  # the other tests count the store's one run
    assert new.data.tags["ragexp.config_source"] == "stored_run" and new.data.tags["ragexp.reproduces"] == store[2]


def test_reproduce_leaves_no_temporary_folder(store, tmp_path):
    proc = reproduce(store, tmp_path, "--no-log")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert left_in_tmpdir(tmp_path) == []


def test_annotate_from_run_leaves_no_temporary_folder(store, tmp_path):
    root, db, run_id, _, _ = store
    evalset = tmp_path / "evalset.jsonl"
    evalset.write_bytes((root / "evalset.jsonl").read_bytes())
    proc = ragexp(tmp_path, "evalset", "annotate", str(evalset), "--corpus", str(root / "corpus"), "--from-run", run_id,
                  "--queue-only", "--tracking-uri", f"sqlite:///{db}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert left_in_tmpdir(tmp_path) == []


def test_runs_started_together_in_one_folder_get_distinct_output_folders(tmp_path):
    (tmp_path / "in").mkdir()
    dataset = write_tiny_dataset(tmp_path / "in")
    args = [sys.executable, "-m", "ragexp.cli", "run", *dataset_args(dataset, tmp_path / "mlflow.db"), "retrieval=bm25",
            "eval.bootstrap_resamples=20"]
    procs = [subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-3000:]
    folders = list(tmp_path.glob("outputs/*/*"))
    assert len(folders) == 3, folders
    assert all(len(json.loads((f / "ragexp_results.json").read_text())["per_query"]) > 0 for f in folders)


def test_the_sweep_checks_leave_no_parent_experiment_or_multirun_folder(tmp_path):
    (tmp_path / "in").mkdir()
    dataset = write_tiny_dataset(tmp_path / "in")
    db = tmp_path / "mlflow.db"
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "leaky.yaml").write_text(f"# @package _global_\ntracking:\n  note: Bearer {SECRET[3:]}\n", encoding="utf-8")
    for extra in (["--config-dir", str(tmp_path / "conf"), "experiment=leaky"], ["chunking=fixed", "chunking.overlap=5000"],
                  ["dataset.evalset=???"]):
        args = [a for a in dataset_args(dataset, db) if not (extra == ["dataset.evalset=???"] and a.startswith("dataset.evalset="))]
        line = one_error_line(ragexp(tmp_path, "run", "-m", *args, "retrieval=bm25,dense", *extra))
        assert "field '" in line, line
        assert not (tmp_path / "multirun").exists(), line
        assert not db.exists() or job_runs(db)[0] == [], line
    assert _files_containing(tmp_path / "in", SECRET[3:]) == []
    assert os.listdir(tmp_path / "tmpdir") == []
