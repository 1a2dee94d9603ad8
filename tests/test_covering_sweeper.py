"""``hydra/sweeper=ragexp`` validates a batch by composing a covering set of configs (every value
of every key before the first job runs, far fewer compositions); :mod:`ragexp.heap`."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import env_with_sitecustomize
from test_runner_sweep import ENV, dataset_args, job_runs

from hydra_plugins.ragexp_sweeper.covering_sweeper import covering_overrides
from ragexp import heap


def test_covering_set_uses_every_value_of_every_key_once_at_least():
    batch = [[f"chunking={c}", f"retrieval={r}", "eval.ks=[1,3]"] for c in ("fixed", "recursive", "markdown")
             for r in ("bm25", "dense")]
    covering = covering_overrides(batch)
    assert covering == [["chunking=fixed", "retrieval=bm25", "eval.ks=[1,3]"],
                        ["chunking=recursive", "retrieval=dense", "eval.ks=[1,3]"],
                        ["chunking=markdown", "retrieval=bm25", "eval.ks=[1,3]"]]
    assert all(job in batch for job in covering)  # picked from the sweep's own cross product
    assert covering_overrides([]) == [] and covering_overrides([[]]) == [[]]


def test_freeze_survivors_freezes_only_a_heap_that_grew_and_resumes_collection():
    gc.unfreeze()
    try:
        heap.pause_collection()
        assert heap.freeze_survivors(growth=10**9) is False and gc.get_freeze_count() == 0 and gc.isenabled()
        survivors = [[i] for i in range(5000)]
        assert heap.freeze_survivors(growth=1000) is True and gc.isenabled()
        assert gc.get_freeze_count() >= len(survivors)
        assert len(gc.get_objects()) < 1000  # later collections walk only what was created since
    finally:
        gc.unfreeze()
        gc.enable()


def test_every_few_freezes_reclaim_frozen_objects_that_died_in_cycles():
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the cyclic collector frees it

    gc.unfreeze()
    try:
        cycles = [Node() for _ in range(2000)]
        heap.freeze_survivors(growth=0)
        frozen_with_cycles = gc.get_freeze_count()
        del cycles  # frozen garbage now: no ordinary pass frees it
        for _ in range(heap.RECLAIM_EVERY):
            heap.freeze_survivors(growth=0)
            if gc.get_freeze_count() < frozen_with_cycles - 1000:
                break
        assert gc.get_freeze_count() < frozen_with_cycles - 1000  # the reclaiming pass freed them
    finally:
        gc.unfreeze()


#: Counts the compositions of job configs in the sweep's process (printed at exit).
COUNT_COMPOSITIONS = """
import atexit, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl

_compose = ConfigLoaderImpl.load_sweep_config
_calls = []


def _counted(self, master_config, sweep_overrides):
    _calls.append(tuple(sweep_overrides))
    return _compose(self, master_config, sweep_overrides)


ConfigLoaderImpl.load_sweep_config = _counted
atexit.register(lambda: sys.stderr.write(f"COMPOSED {len(_calls)}\\n"))
"""


def sweep(tiny_dataset, tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ragexp.cli", "run", "-m", *dataset_args(tiny_dataset, tmp_path / "mlflow.db"),
               f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'multirun'}", *overrides]
    env = env_with_sitecustomize(ENV, tmp_path / "site", COUNT_COMPOSITIONS)
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_sweep_composes_a_covering_set_then_each_job(tiny_dataset, tmp_path):
    proc = sweep(tiny_dataset, tmp_path, "chunking=fixed,recursive", "retrieval=bm25", "eval.ks=[1,3],[5]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, parents, children = job_runs(tmp_path / "mlflow.db")
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    # 2 to validate (every value once: fixed+[1,3], recursive+[5]) and 4 to launch; Hydra's basic
    # sweeper composes 8 (all 4 to validate, then all 4 again to launch)
    assert "COMPOSED 6\n" in proc.stderr


@pytest.mark.slow
def test_a_bad_value_last_in_the_sweep_fails_before_any_job_runs(tiny_dataset, tmp_path):
    proc = sweep(tiny_dataset, tmp_path, "chunking=fixed,recursive,nosuch", "retrieval=bm25")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "nosuch" in proc.stderr and "COMPOSED 3\n" in proc.stderr
    assert not list((tmp_path / "multirun").rglob("ragexp_results.json"))  # no job ran
    _, parents, children = job_runs(tmp_path / "mlflow.db")
    assert [p.info.status for p in parents] == ["FAILED"] and children == []  # the parent is not left RUNNING
