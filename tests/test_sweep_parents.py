"""Stale sweep parents: a parent left RUNNING by a process that is gone is closed KILLED when the
same sweep (same task overrides, same experiment) is launched again; a live one, another
sweep's, or one opened on another host is left alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from ragexp.tracking.sweep import (
    TAG_SWEEP_HOST,
    close_stale_parents,
    launcher_tags,
    sweep_key,
)
from tests.helpers.cli import ENV, dataset_args, job_runs


def test_only_dead_parents_of_the_same_sweep_are_closed(tmp_path):
    client = store.connect(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = store.ensure_experiment(client, "sweeps")
    key = sweep_key(["retrieval=bm25", "chunking=fixed,recursive"])
    assert key == sweep_key(["chunking=fixed,recursive", "retrieval=bm25"])  # order does not matter
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead = {**launcher_tags(key), "ragexp.sweep.pid": gone.stdout.strip()}  # that process has exited
    runs = {
        "dead": dead,
        "alive": launcher_tags(key),  # this very process
        "other-sweep": {**dead, "ragexp.sweep.key": sweep_key(["retrieval=dense"])},
        "other-host": {**dead, TAG_SWEEP_HOST: "a-slurm-node"},
        "pid-reused": {**launcher_tags(key), "ragexp.sweep.process_start": "1.000"},  # our pid, another start time
    }
    ids = {name: client.create_run(experiment, tags={store.TAG_KIND: "sweep", **tags}).info.run_id for name, tags in runs.items()}
    closed = close_stale_parents(client, experiment, key)
    assert sorted(closed) == sorted([ids["dead"], ids["pid-reused"]])
    status = {name: MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {"dead": "KILLED", "alive": "RUNNING", "other-sweep": "RUNNING", "other-host": "RUNNING", "pid-reused": "KILLED"}


@pytest.mark.slow
def test_a_sweep_stopped_by_bad_input_closes_its_parent(tiny_dataset, tmp_path):
    """BM25's ``b`` outside [0, 1] is refused when the retriever is built, in the job (the gate
    refuses the configs it can check before the parent opens: tests/test_sweep_relaunch.py)."""
    db = tmp_path / "mlflow.db"
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "run", "-m", *dataset_args(tiny_dataset, db), "retrieval=bm25",
                           "retrieval.b=1.5,0.75"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in proc.stderr.splitlines() if "ragexp run: error:" in line]
    assert proc.returncode == 2 and len(lines) == 1 and "field 'retrieval.b'" in lines[0], proc.stderr[-3000:]
    _, (parent,), children = job_runs(db)
    assert parent.info.status == "FAILED" and children == []  # closed, not left RUNNING
