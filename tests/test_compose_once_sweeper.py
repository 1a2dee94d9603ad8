"""``hydra/sweeper=ragexp`` composes each job's config once and still validates the whole batch
before the first job runs; :mod:`ragexp.heap` freezes only a grown heap."""

from __future__ import annotations

import gc
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from hydra_plugins.ragexp_sweeper.compose_once import ComposedConfigs
from omegaconf import OmegaConf
from test_runner_sweep import ENV, dataset_args, job_runs

from ragexp import heap


class CountingLoader:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def load_sweep_config(self, master_config, sweep_overrides):
        self.calls.append(tuple(sweep_overrides))
        return OmegaConf.create({"overrides": list(sweep_overrides)})

    def get_sources(self):
        return ["repository"]


def test_a_config_composed_ahead_is_handed_out_once_then_composed_again():
    loader, master = CountingLoader(), OmegaConf.create({})
    configs = ComposedConfigs(loader)
    configs.compose_ahead(master, ["a=1"])
    first = configs.load_sweep_config(master, ["a=1"])
    assert first.overrides == ["a=1"] and loader.calls == [("a=1",)]  # not composed again
    again = configs.load_sweep_config(master, ["a=1"])  # e.g. a launcher retrying the job
    assert again is not first and loader.calls == [("a=1",), ("a=1",)]
    other_master = OmegaConf.create({})
    configs.compose_ahead(master, ["b=2"])
    configs.load_sweep_config(other_master, ["b=2"])  # another master config: never the cached one
    assert loader.calls[-1] == ("b=2",) and len(loader.calls) == 4
    assert configs.get_sources() == ["repository"]  # everything else goes to the wrapped loader


def test_pickled_loader_ships_without_the_configs_composed_ahead():
    configs = ComposedConfigs(CountingLoader())
    configs.compose_ahead(OmegaConf.create({}), ["a=1"])
    shipped = pickle.loads(pickle.dumps(configs))
    assert shipped.ahead == {} and isinstance(shipped.loader, CountingLoader)


def test_freeze_survivors_freezes_only_a_heap_that_grew():
    gc.unfreeze()
    try:
        assert heap.freeze_survivors(growth=10**9) == 0 and gc.get_freeze_count() == 0
        survivors = [[i] for i in range(5000)]
        frozen = heap.freeze_survivors(growth=1000)
        assert frozen >= len(survivors) and gc.get_freeze_count() == frozen
        assert len(gc.get_objects()) < 1000  # later collections walk only what was created since
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
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNT_COMPOSITIONS, encoding="utf-8")
    command = [sys.executable, "-m", "ragexp.cli", "run", "-m", *dataset_args(tiny_dataset, tmp_path / "mlflow.db"),
               f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'multirun'}", *overrides]
    return subprocess.run(command, cwd=tmp_path, env={**ENV, "PYTHONPATH": str(site)}, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_each_job_config_is_composed_once(tiny_dataset, tmp_path):
    proc = sweep(tiny_dataset, tmp_path, "chunking=fixed,recursive", "retrieval=bm25", "eval.ks=[1,3],[5]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, parents, children = job_runs(tmp_path / "mlflow.db")
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    assert "COMPOSED 4\n" in proc.stderr  # Hydra's basic sweeper composes 8: validation, then launch


@pytest.mark.slow
def test_a_bad_value_last_in_the_sweep_fails_before_any_job_runs(tiny_dataset, tmp_path):
    proc = sweep(tiny_dataset, tmp_path, "chunking=fixed,recursive,nosuch", "retrieval=bm25")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "nosuch" in proc.stderr and "COMPOSED 3\n" in proc.stderr
    assert not list((tmp_path / "multirun").rglob("ragexp_results.json"))  # no job ran
