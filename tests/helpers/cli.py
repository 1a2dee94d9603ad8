"""Driving the real ``ragexp`` CLI in a subprocess, and reading back what a sweep logged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from ragexp.tracking import store

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def ragexp(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"ragexp {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def dataset_args(tiny_dataset, db: Path) -> list[str]:
    corpus, evalset = tiny_dataset
    return ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
            f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny", "progress=false"]


def job_runs(db: Path):
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("tiny")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
    children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
    return client, parents, children
