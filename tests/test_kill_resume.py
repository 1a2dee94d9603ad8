"""Resumable sweeps: a sweep killed part-way leaves no FINISHED run with partial results, and the
same command launched again runs only the configs that have no FINISHED run yet.

A four-job sweep (four chunkers, BM25, the sequential basic launcher) runs in a subprocess
against a sqlite store. An instrumented ``sitecustomize`` holds the sweep at a chosen point (the
second job's start, the first run's artifact upload, the parent's summary) and writes a marker
file there (:func:`tests.helpers.subprocess_env.env_holding_at`); the test waits for the marker,
kills the process (SIGTERM, which ragexp turns into an interrupt, or SIGKILL, which nothing can
catch) and releases the hold: no sleep decides where the signal lands.
Runs are matched to configs by their ``ragexp.config_hash`` tag, the key resume looks up
(:func:`ragexp.tracking.find_finished_run`). A SIGTERM sent while a job's run is open (its
metrics and artifacts being written) must close that run KILLED; the sweep's parent run is
closed KILLED by an interrupt. ``resume=false`` runs everything again.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.runtime import interrupt
from ragexp.tracking import store
from ragexp.tracking.metric_names import results_view
from tests.helpers.cli import ENV
from tests.helpers.subprocess_env import Hold, env_holding_at, env_with_sitecustomize
from tests.helpers.tiny_dataset import write_tiny_dataset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CHUNKERS = ("fixed", "recursive", "sentence", "none")
KILL_DEADLINE_S = 300


@pytest.fixture(autouse=True)
def _no_download_progress_bars(monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def sweep_command(tiny_dataset, tmp_path: Path, *extra: str) -> list[str]:
    corpus, evalset = tiny_dataset
    return [sys.executable, "-m", "ragexp.cli", "run", "-m", "dataset=evalset", f"dataset.corpus={corpus}",
            f"dataset.evalset={evalset}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
            "tracking.experiment=resume", "progress=false", "retrieval=bm25", f"chunking={','.join(CHUNKERS)}",
            "eval.bootstrap_resamples=200",
            f"cache_dir={tmp_path / 'cache'}", *extra]


def launch(tiny_dataset, tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    command = sweep_command(tiny_dataset, tmp_path, f"hydra.sweep.dir={tmp_path / name}", *extra)
    proc = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def open_store(tmp_path: Path) -> MlflowClient:
    """A client on the test's store; a fresh store is migrated here once, before any ragexp
    process opens it (two processes migrating one new sqlite file at once corrupt it)."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client.search_experiments(max_results=1)
    return client


def runs_by_kind(client: MlflowClient) -> tuple[list, list]:
    experiment = client.get_experiment_by_name("resume")
    if experiment is None:
        return [], []
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return ([r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"],
            [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"])


def assert_complete(client: MlflowClient, run, downloads: Path) -> None:
    """A FINISHED job run carries everything a job logs: metrics, tags and all artifacts."""
    aggregates = results_view(run.data.metrics, run.data.params)
    assert aggregates.get("n_queries") == 6.0 and "recall_at_5" in aggregates
    assert run.data.tags[store.TAG_CONFIG_HASH] and run.data.params["chunking.name"] in CHUNKERS
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config", "ragexp_results.json", store.PER_QUERY_TABLE, "plots"} <= artifacts, artifacts
    target = downloads / run.info.run_id
    target.mkdir(parents=True, exist_ok=True)
    local = Path(client.download_artifacts(run.info.run_id, "ragexp_results.json", str(target)))
    results = json.loads(local.read_text(encoding="utf-8"))
    assert len(results["per_query"]) == 7 and results["meta"]["run_id"] == run.info.run_id


def start_sweep(dataset: tuple[Path, Path], tmp_path: Path, env: dict[str, str] = ENV) -> subprocess.Popen:
    return subprocess.Popen(sweep_command(dataset, tmp_path, f"hydra.sweep.dir={tmp_path / 'killed'}"), cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def start_held_sweep(dataset: tuple[Path, Path], tmp_path: Path, target: str, call: int = 1
                     ) -> tuple[subprocess.Popen, Hold]:
    """The sweep, held at the ``call``-th call of ``target`` (see :func:`env_holding_at`)."""
    env, hold = env_holding_at(ENV, tmp_path / "site", target, call, timeout_s=KILL_DEADLINE_S)
    return start_sweep(dataset, tmp_path, env), hold


def signal_when_held(process: subprocess.Popen, hold: Hold, signum: int) -> tuple[str, float]:
    """Wait until the process is at ``hold``, send ``signum``, release the hold; returns the
    process's stderr and how long after the signal it was gone. The release comes after the
    signal is pending, so a handler that only records it (inside store writes) has run before
    the held call goes on."""
    try:
        hold.wait(process, KILL_DEADLINE_S)
        process.send_signal(signum)
        killed_at = time.monotonic()
        hold.release()
        _, stderr = process.communicate(timeout=120)
        return stderr, time.monotonic() - killed_at
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_sweep_leaves_no_partial_run_and_relaunch_runs_only_the_rest(tiny_dataset, tmp_path, signum):
    client = open_store(tmp_path)
    # Held as the second job starts: the first job's run is FINISHED, the other three are to come.
    process, hold = start_held_sweep(tiny_dataset, tmp_path, "ragexp.jobs.job:prepare_data", call=2)
    stderr, exit_s = signal_when_held(process, hold, signum)
    assert process.returncode != 0, "the sweep completed before the kill"

    (killed_parent,), children = runs_by_kind(client)
    assert killed_parent.info.status != "FINISHED"
    finished_before = {r.data.tags[store.TAG_CONFIG_HASH]: r for r in children if r.info.status == "FINISHED"}
    left = Counter(r.info.status for r in children)
    print(f"{signal.Signals(signum).name}: exited {exit_s:.1f} s after the kill; job runs left: {dict(left)}; "
          f"sweep run left {killed_parent.info.status}; stderr:\n{stderr[-3000:]}")
    assert len(finished_before) == 1
    assert len(finished_before) == left["FINISHED"]  # no config FINISHED twice
    for run in finished_before.values():
        assert_complete(client, run, tmp_path / "downloads")
    # The interrupted job's run, if it was opened at all, is not FINISHED. An interrupt closes it
    # KILLED; after SIGKILL nothing can close it, so it may stay RUNNING.
    allowed = {"FINISHED", "KILLED", "FAILED"} | ({"RUNNING"} if signum == signal.SIGKILL else set())
    assert set(left) <= allowed, left
    assert sum(n for status, n in left.items() if status != "FINISHED") <= 1  # only the interrupted job

    # SIGKILL leaves the parent RUNNING (nothing could close it); the relaunch of the same sweep
    # finds it, sees its process is gone, and closes it KILLED.
    assert killed_parent.info.status == ("RUNNING" if signum == signal.SIGKILL else "KILLED")
    relaunched_at_ms = int(time.time() * 1000)
    proc = launch(tiny_dataset, tmp_path, "relaunch")
    parents, children = runs_by_kind(client)
    assert len(parents) == 2
    new_parent = next(p for p in parents if p.info.start_time >= relaunched_at_ms)
    assert new_parent.info.status == "FINISHED"
    assert client.get_run(killed_parent.info.run_id).info.status == "KILLED"

    finished = [r for r in children if r.info.status == "FINISHED"]
    per_config = Counter(r.data.tags[store.TAG_CONFIG_HASH] for r in finished)
    assert len(finished) == len(CHUNKERS) and len(per_config) == len(CHUNKERS), per_config  # one per config
    assert sorted(r.data.params["chunking.name"] for r in finished) == sorted(CHUNKERS)
    for run in finished:
        assert_complete(client, run, tmp_path / "downloads")
    # Configs FINISHED before the relaunch were skipped: same run, and no run of theirs started since.
    for config_hash, run in finished_before.items():
        runs_of_config = [r for r in children if r.data.tags.get(store.TAG_CONFIG_HASH) == config_hash]
        assert [r.info.run_id for r in runs_of_config] == [run.info.run_id]
    rerun = [r for r in children if r.info.start_time >= relaunched_at_ms]
    assert len(rerun) == len(CHUNKERS) - len(finished_before)
    assert all(r.data.tags[store.PARENT_TAG] == new_parent.info.run_id for r in rerun)
    assert {r.data.tags[store.TAG_CONFIG_HASH] for r in rerun}.isdisjoint(finished_before)
    assert proc.stdout.count("resume: skipping") == len(finished_before)
    assert new_parent.data.metrics["sweep.children"] == len(rerun)


@pytest.fixture(scope="module")
def sigterm_in_open_run(tmp_path_factory) -> tuple[subprocess.Popen, str, MlflowClient, Path]:
    """A sweep sent SIGTERM while its first job run is open (RUNNING: created, its artifact upload
    held at store.run_artifacts, through which every artifact write goes); returns the ended
    process, its stderr, a client on its store and its folder."""
    tmp_path = tmp_path_factory.mktemp("sigterm")
    client = open_store(tmp_path)
    process, hold = start_held_sweep(write_tiny_dataset(tmp_path), tmp_path,
                                     "ragexp.tracking.store:run_artifacts")
    stderr, exit_s = signal_when_held(process, hold, signal.SIGTERM)
    print(f"SIGTERM in an open run: exited {exit_s:.1f} s later with {process.returncode}\n{stderr[-6000:]}")
    return process, stderr, client, tmp_path


def test_sigterm_closes_the_open_job_run_killed(sigterm_in_open_run):
    _, _, client, tmp_path = sigterm_in_open_run
    _, children = runs_by_kind(client)
    statuses = Counter(r.info.status for r in children)
    print(f"job runs after SIGTERM: {dict(statuses)}")
    # The first job's run is held open (its artifact upload waits), so the signal lands while
    # it is RUNNING: it is closed KILLED, never left RUNNING or FINISHED, and no other job starts.
    assert statuses == Counter({"KILLED": 1}), statuses


def test_sigterm_closes_the_sweep_parent_killed_and_exits_quietly(sigterm_in_open_run):
    process, stderr, client, _ = sigterm_in_open_run
    (parent,), _ = runs_by_kind(client)
    assert parent.info.status == "KILLED"
    assert "Traceback" not in stderr and process.returncode == 128 + signal.SIGTERM


def test_sigterm_while_the_parent_is_closed_leaves_it_killed_not_running(tiny_dataset, tmp_path):
    """Every job FINISHED, the parent's summary being drawn: the interrupt still finds the parent
    open and closes it KILLED (it was forgotten before it was closed, and stayed RUNNING)."""
    client = open_store(tmp_path)
    # Held as the summary is drawn (on_multirun_end, after the last job FINISHED).
    process, hold = start_held_sweep(tiny_dataset, tmp_path, "ragexp.tracking.sweep_summary:log_sweep_summary")
    stderr, _ = signal_when_held(process, hold, signal.SIGTERM)
    (parent,), children = runs_by_kind(client)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert parent.info.status == "KILLED" and f"sweep parent run {parent.info.run_id} closed KILLED" in stderr
    assert [r.info.status for r in children] == ["FINISHED"] * len(CHUNKERS)


#: In the second job, SIGTERM arrives while sqlite runs a Python callback: sqlite turns the
#: handler's raise into ``OperationalError``, which the job reports as bad input.
SIGNAL_AS_ANOTHER_ERROR = """
import os
import signal
import sqlite3

import ragexp.jobs.job
from ragexp.errors import RagexpInputError

_prepare_data = ragexp.jobs.job.prepare_data
_calls = []


def _terminate():
    os.kill(os.getpid(), signal.SIGTERM)
    return 0


def _prepare_data_signalled_in_sqlite(*args, **kwargs):
    _calls.append(None)
    if len(_calls) == 2:
        db = sqlite3.connect(":memory:")
        db.create_function("terminate", 0, _terminate)
        try:
            db.execute("select terminate()").fetchall()
        except sqlite3.OperationalError as err:
            raise RagexpInputError(f"cannot read the data: {err}") from None
    return _prepare_data(*args, **kwargs)


ragexp.jobs.job.prepare_data = _prepare_data_signalled_in_sqlite
"""


def test_a_signal_that_surfaces_as_another_error_is_still_an_interrupt(tiny_dataset, tmp_path):
    """The error a termination signal caused is not reported as bad input (exit 2, parent FAILED):
    the sweep ends as interrupted (exit 143, parent KILLED), and a relaunch resumes it."""
    client = open_store(tmp_path)
    env = env_with_sitecustomize(ENV, tmp_path / "site", SIGNAL_AS_ANOTHER_ERROR)
    command = sweep_command(tiny_dataset, tmp_path, f"hydra.sweep.dir={tmp_path / 'signalled'}")
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    (parent,), children = runs_by_kind(client)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-3000:]
    assert parent.info.status == "KILLED" and "interrupted by signal 15" in proc.stderr
    assert "error:" not in proc.stderr and "Traceback" not in proc.stderr
    assert [r.info.status for r in children] == ["FINISHED"]


def test_resume_false_runs_every_config_again(tiny_dataset, tmp_path):
    client = open_store(tmp_path)
    launch(tiny_dataset, tmp_path, "first")
    _, first = runs_by_kind(client)
    assert len(first) == len(CHUNKERS) and all(r.info.status == "FINISHED" for r in first)

    relaunched_at_ms = int(time.time() * 1000)
    proc = launch(tiny_dataset, tmp_path, "again", "resume=false")
    _, children = runs_by_kind(client)
    again = [r for r in children if r.info.start_time >= relaunched_at_ms]
    assert len(children) == 2 * len(CHUNKERS) and len(again) == len(CHUNKERS)
    assert all(r.info.status == "FINISHED" for r in again)
    per_config = Counter(r.data.tags[store.TAG_CONFIG_HASH] for r in children)
    assert len(per_config) == len(CHUNKERS) and set(per_config.values()) == {2}  # same hashes, each run twice
    assert "resume: skipping" not in proc.stdout


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_is_held_in_store_writes_and_not_lost_in_a_finaliser(monkeypatch):
    """The two hazards of raising from a signal handler (see :mod:`ragexp.runtime.interrupt`), in-process."""
    monkeypatch.setattr(interrupt, "_received", None)
    previous = signal.getsignal(signal.SIGTERM)
    interrupt.install(signal.SIGTERM)
    try:
        with interrupt.deferred():
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            survived_the_signal = True
        assert survived_the_signal
        with pytest.raises(interrupt.Interrupted):
            interrupt.check()

        monkeypatch.setattr(interrupt, "_received", None)

        class SignalledWhileFinalising:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)  # Python prints "Exception ignored" and drops the raise

        SignalledWhileFinalising()
        gc.collect()
        with pytest.raises(interrupt.Interrupted, match="signal 15"):
            interrupt.check()
    finally:
        signal.signal(signal.SIGTERM, previous)
