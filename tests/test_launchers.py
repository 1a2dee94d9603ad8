"""Sweeps on Hydra launchers whose jobs run in other processes: one MLflow parent, one child per job.

The submitit launcher in local mode is the SLURM code path without a cluster: Hydra pickles each
job into ``<sweep dir>/.submitit/<id>/`` and submitit runs it in a separate Python process, exactly
as ``submitit_slurm`` would on a node. The parent run is created by ``ragexp.tracking.sweep`` in the
launching process; each job must find it from its own process (and its own working directory).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store

pytestmark = pytest.mark.slow
pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher (the test extra) missing")

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
METRICS = {f"{m}_at_{k}" for m in ("recall", "hit_rate", "ndcg") for k in (1, 5)} | {"mrr", "n_queries"}


def sweep(cwd: Path, tiny_dataset, db: Path, *overrides: str) -> subprocess.CompletedProcess:
    corpus, evalset = tiny_dataset
    args = ["run", "-m", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
            f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny", "progress=false", "retrieval=bm25",
            f"cache_dir={cwd}/cache", "chunking=fixed,recursive", *overrides]
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def assert_one_parent_two_finished_children(db: Path) -> None:
    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
    children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
    assert len(runs) == 3 and len(parents) == 1 and len(children) == 2, [r.info.run_name for r in runs]
    parent = parents[0]
    assert [c.data.tags.get(store.PARENT_TAG) for c in children] == [parent.info.run_id] * 2
    assert [c.info.status for c in children] == ["FINISHED"] * 2
    assert {c.data.params["chunking.name"] for c in children} == {"fixed", "recursive"}
    assert len({c.info.run_name for c in children}) == 2
    for child in children:
        assert METRICS <= set(child.data.metrics), METRICS - set(child.data.metrics)
        assert child.data.metrics["n_queries_no_gold"] == 1.0  # the tiny set's one unanswerable item
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["sweep.children"] == 2 and parent.data.metrics["sweep.children_finished"] == 2


def test_submitit_local_sweep_runs_each_job_in_its_own_process(tiny_dataset, tmp_path):
    db, sweep_dir = tmp_path / "mlflow.db", tmp_path / "sweep"
    sweep(tmp_path, tiny_dataset, db, "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5",
          "hydra.launcher.cpus_per_task=1", f"hydra.sweep.dir={sweep_dir}")
    assert_one_parent_two_finished_children(db)
    # Each job went through submitit: pickled in, run by its own process, result pickled out.
    results = sorted(p.name for p in (sweep_dir / ".submitit").glob("*/*_result.pkl"))
    assert len(results) == 2, results
    assert {p.name for p in sweep_dir.iterdir()} >= {"0", "1"}


def test_jobs_find_the_parent_when_their_working_dir_is_not_the_launchers(tiny_dataset, tmp_path):
    """A relative sweep dir seen from a job that changed directory (hydra.job.chdir=true; a Ray node
    whose working directory differs) is not the launcher's: the parent id travels in the job's
    config, not on a path."""
    db = tmp_path / "mlflow.db"
    sweep(tmp_path, tiny_dataset, db, "hydra.job.chdir=true", "hydra.sweep.dir=relative_sweep")
    assert_one_parent_two_finished_children(db)
    assert (tmp_path / "relative_sweep" / "0" / ".hydra").is_dir()  # the jobs ran in their own dirs


def test_ray_local_sweep(tiny_dataset, tmp_path):
    """Ray launcher on a local Ray: runs only where ``hydra-ray-launcher`` is installed (it is not a
    test dependency: it pins cloudpickle<3, see docs/scale.md); measured 60-76 s here, 3/3 passed."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="hydra-ray-launcher not installed (optional)")
    import shutil
    import tempfile

    db, sweep_dir = tmp_path / "mlflow.db", tmp_path / "sweep"
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # AF_UNIX socket paths must stay under 108 bytes
    try:
        sweep(tmp_path, tiny_dataset, db, "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
              "+hydra.launcher.ray.init.include_dashboard=false", f"+hydra.launcher.ray.init._temp_dir={ray_dir}",
              f"hydra.sweep.dir={sweep_dir}")
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert_one_parent_two_finished_children(db)
    assert {p.name for p in sweep_dir.iterdir()} >= {"0", "1"}
