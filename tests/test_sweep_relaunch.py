"""A sweep is checked whole before its first job, and its summary covers the whole sweep.

- Every job's config passes the job-spec gate before anything is written: a bad value in the
  LAST config (or an option Hydra cannot compose, or a missing eval set) refuses the sweep with one
  line naming the job and the field, and leaves no ``mlflow.db``, ``multirun/`` or ``outputs/``;
  a component's size field (``embedding.batch_size=0``) is refused at the gate with empty model
  caches, in seconds, before any model export.
- A relaunch summarises every job of the sweep: a job skipped by ``resume=true`` reuses the
  earlier launch's FINISHED run, and the new parent covers it. After a bad value fixed, after an
  interrupt (SIGINT to a real process held at a known point), and on running the same sweep again,
  the parent's best is the best of all the sweep's runs, computed here from the runs' own metrics.

Tiny corpus, BM25: each launch takes a few seconds.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from ragexp.tracking.metric_names import results_view
from ragexp.tracking.sweep_runs import reused_ids
from ragexp.tracking.sweep_summary import BEST_TAG_PREFIX
from tests.helpers.cli import ENV
from tests.helpers.subprocess_env import env_holding_at

pytestmark = [pytest.mark.timeout(600)]

WRITTEN = ("mlflow.db", "mlflow.db.lock", "mlruns", "multirun", "outputs", "cache", ".ragexp_cache")


def command(tiny_dataset, folder: Path, *overrides: str, evalset: Path | None = None) -> list[str]:
    corpus, default_evalset = tiny_dataset
    return [sys.executable, "-m", "ragexp.cli", "run", "dataset=evalset", f"dataset.corpus={corpus}",
            f"dataset.evalset={evalset or default_evalset}", f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
            "tracking.experiment=relaunch", "progress=false", "retrieval=bm25", "eval.bootstrap_resamples=200",
            f"cache_dir={folder / 'cache'}", *overrides]


def ragexp_run(tiny_dataset, folder: Path, *overrides: str, env=ENV, evalset: Path | None = None):
    return subprocess.run(command(tiny_dataset, folder, *overrides, evalset=evalset), cwd=folder, env=env,
                          capture_output=True, text=True, timeout=400)


def written(folder: Path) -> list[str]:
    return sorted(name for name in WRITTEN if (folder / name).exists())


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# -- checked before work ------------------------------------------------------------------------

#: A sweep whose LAST job is bad, and what its one line must name.
LAST_CONFIG_BAD = {
    "chunk overlap": (["chunking=fixed", "chunking.size=120", "chunking.overlap=20,120"], "field 'chunking.overlap'"),
    "embedding batch size": (["embedding.batch_size=16,0"], "field 'embedding.batch_size'"),
    "reranker batch size": (["reranker=cross_encoder", "+reranker.batch_size=8,0"], "field 'reranker.batch_size'"),
    "reranker depth": (["reranker=embedding", "reranker.top_n=5,0"], "field 'reranker.top_n'"),
    "cut-off": (["eval.ks=[1,5],[1,0]"], "field 'eval.ks"),
    "sample": (["eval.sample=3,0"], "field 'eval.sample'"),
}


@pytest.mark.parametrize("case", LAST_CONFIG_BAD, ids=list(LAST_CONFIG_BAD))
def test_a_bad_value_in_the_last_config_refuses_the_sweep_before_its_first_job(tiny_dataset, tmp_path, case):
    overrides, names = LAST_CONFIG_BAD[case]
    proc = ragexp_run(tiny_dataset, tmp_path, "-m", *overrides)
    lines = error_lines(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("ragexp run: error: sweep job ") and names in lines[0], lines
    assert "Launching" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert written(tmp_path) == []  # no store, parent run, sweep folder or cache


def test_an_unknown_option_in_a_sweep_writes_nothing(tiny_dataset, tmp_path):
    proc = ragexp_run(tiny_dataset, tmp_path, "-m", "chunking=fixed,nosuchchunker")
    lines = error_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and "nosuchchunker" in lines[0], proc.stderr[-3000:]
    assert written(tmp_path) == []


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_a_missing_eval_set_writes_no_store(tiny_dataset, tmp_path, sweep):
    missing = tmp_path / "no_such_evalset.jsonl"
    proc = ragexp_run(tiny_dataset, tmp_path, *(["-m", "chunking=fixed,markdown"] if sweep else []), evalset=missing)
    lines = error_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and str(missing) in lines[0], proc.stderr[-3000:]
    assert written(tmp_path) == []


#: Size fields of the model components, each refused at the gate with empty caches: no download,
#: no export (the encoder's ONNX export took 77 s before a zero batch size failed).
SIZE_FIELDS = ["embedding.batch_size=0", "embedding.max_seq_length=0", "retrieval=dense retrieval.threads=0",
               "retrieval=dense retrieval.ef_search=0", "reranker=cross_encoder +reranker.batch_size=-1",
               "reranker=embedding reranker.top_n=0", "embedding.batch_size=100000"]


@pytest.mark.parametrize("overrides", SIZE_FIELDS)
def test_a_size_field_is_refused_with_empty_caches_before_any_model_export(tiny_dataset, tmp_path, overrides):
    caches = {name: tmp_path / name for name in ("xdg", "hf", "onnx")}
    for folder in caches.values():
        folder.mkdir()
    env = {**ENV, "XDG_CACHE_HOME": str(caches["xdg"]), "HF_HOME": str(caches["hf"]),
           "RAGEXP_ONNX_EXPORT_DIR": str(caches["onnx"])}
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    proc = ragexp_run(tiny_dataset, work, *overrides.split(), env=env)
    took = time.monotonic() - started
    field = overrides.split()[-1].split("=")[0].lstrip("+")
    lines = error_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and f"field '{field}'" in lines[0], proc.stderr[-3000:]
    assert took < 60, f"refused after {took:.0f} s"  # start-up and the gate only (~3 s); an export takes over a minute
    assert [p for folder in caches.values() for p in folder.iterdir()] == []  # nothing downloaded or exported
    assert written(work) == []


# -- a summary of the whole sweep ---------------------------------------------------------------

def sweep_runs(folder: Path) -> tuple[MlflowClient, list, list]:
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("relaunch")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = sorted((r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"), key=lambda r: r.info.start_time)
    jobs = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
    return client, parents, jobs


def metric(run, name: str) -> float:
    return results_view(run.data.metrics, run.data.params)[name]


def assert_names_the_true_best(parent, runs: list, name: str) -> None:
    """The parent's best on ``name`` is the best of ``runs`` (read from each run's own metrics)."""
    truth = max(metric(run, name) for run in runs)
    named = parent.data.tags[f"{BEST_TAG_PREFIX}{name}"]  # "<run name> = 0.5056 (run 1a2b3c4d)"
    winner = next(run for run in runs if f"(run {run.info.run_id[:8]}" in named)
    assert metric(winner, name) == truth, (named, [(r.info.run_name, metric(r, name)) for r in runs])
    assert f"**Best of {len(runs)} runs**" in parent.data.tags[store.DESCRIPTION_TAG]


def test_a_relaunch_after_a_fixed_bad_value_summarises_the_runs_of_both_launches(tiny_dataset, tmp_path):
    """BM25's ``b`` outside [0, 1] is refused when the retriever is built (job time, not the gate):
    the first launch logs b=0.75 and stops at b=1.5; the fixed relaunch reuses b=0.75 (better on
    MRR here than b=0) and runs b=0. The new parent must name b=0.75 best, not "Best of 1 runs"."""
    sweep = ["-m", "chunking=fixed", "chunking.size=60", "chunking.overlap=0"]
    first = ragexp_run(tiny_dataset, tmp_path, *sweep, "retrieval.b=0.75,1.5")
    assert first.returncode == 2 and "field 'retrieval.b'" in first.stderr, first.stderr[-3000:]
    fixed = ragexp_run(tiny_dataset, tmp_path, *sweep, "retrieval.b=0.75,0.0")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    client, (old, new), jobs = sweep_runs(tmp_path)
    assert old.info.status == "FAILED" and new.info.status == "FINISHED"
    assert len(jobs) == 2 and all(run.info.status == "FINISHED" for run in jobs)
    reused = next(run for run in jobs if run.data.params["retrieval.b"] == "0.75")
    assert reused.data.tags[store.PARENT_TAG] == old.info.run_id  # logged by the first launch
    assert reused_ids(new) == [reused.info.run_id] and new.data.metrics["sweep.runs_reused"] == 1
    assert metric(reused, "mrr") > metric(next(r for r in jobs if r is not reused), "mrr")  # the case this test is about
    for name in ("hit_rate_at_5", "mrr", "ndcg_at_5"):
        assert_names_the_true_best(new, jobs, name)
    assert reused.info.run_id in new.data.tags[store.DESCRIPTION_TAG]  # says which run came from the earlier launch


CHUNKERS = ("fixed", "recursive", "sentence", "markdown")


def test_a_sweep_interrupted_then_relaunched_then_run_again_summarises_every_run(tiny_dataset, tmp_path):
    sweep = ["-m", f"chunking={','.join(CHUNKERS)}"]
    # Held as the third job starts (two runs FINISHED), then Ctrl-C (SIGINT) to the real process.
    env, hold = env_holding_at(ENV, tmp_path / "site", "ragexp.jobs.job:prepare_data", call=3, timeout_s=300)
    process = subprocess.Popen(command(tiny_dataset, tmp_path, *sweep), cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        hold.wait(process, 300)
        process.send_signal(signal.SIGINT)
        hold.release()
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGINT, stderr[-3000:]
    _, (interrupted,), before = sweep_runs(tmp_path)
    assert interrupted.info.status == "KILLED"
    finished_before = {r.info.run_id for r in before if r.info.status == "FINISHED"}
    assert len(finished_before) == 2

    relaunch = ragexp_run(tiny_dataset, tmp_path, *sweep)
    assert relaunch.returncode == 0, relaunch.stderr[-3000:]
    _, (_, relaunched), jobs = sweep_runs(tmp_path)
    finished = [r for r in jobs if r.info.status == "FINISHED"]
    assert sorted(r.data.params["chunking.name"] for r in finished) == sorted(CHUNKERS)  # one run per config
    assert relaunched.info.status == "FINISHED" and set(reused_ids(relaunched)) == finished_before
    assert relaunched.data.metrics["sweep.children"] == 2 and relaunched.data.metrics["sweep.runs_reused"] == 2
    for name in ("hit_rate_at_5", "mrr", "ndcg_at_5"):
        assert_names_the_true_best(relaunched, finished, name)

    again = ragexp_run(tiny_dataset, tmp_path, *sweep)  # the same sweep once more: every job reused
    assert again.returncode == 0, again.stderr[-3000:]
    _, parents, jobs = sweep_runs(tmp_path)
    assert [p.info.status for p in parents] == ["KILLED", "FINISHED", "FINISHED"]  # no empty FAILED parent
    assert len(jobs) == len(finished)  # nothing ran again
    assert set(reused_ids(parents[-1])) == {r.info.run_id for r in finished}
    for name in ("hit_rate_at_5", "mrr", "ndcg_at_5"):
        assert_names_the_true_best(parents[-1], finished, name)
