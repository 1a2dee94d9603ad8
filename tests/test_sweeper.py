"""ragexp's sweeper: the basic sweep's jobs and order, each job's config composed once (the check
before the batch and the launcher's call share it), a value Hydra cannot compose stopping the
sweep before any job, and the sweeper in force for ``ragexp run -m``."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext
from hydra_plugins.ragexp_sweeper.ragexp_sweeper import ComposedOnce, RagexpSweeper, job_overrides

from ragexp.config.compose import COMPOSE_LOCK, CONFIG_DIR, compose_config
from ragexp.config.schema import register_schema


class RecordingLauncher:
    """Runs nothing: asks the config loader for each job's config, as Hydra's launchers do."""

    def __init__(self, sweeper: RagexpSweeper) -> None:
        self.sweeper = sweeper
        self.launched: list[tuple[list[str], str]] = []

    def launch(self, batch, initial_job_idx):
        for overrides in batch:
            config = self.sweeper.hydra_context.config_loader.load_sweep_config(self.sweeper.config, list(overrides))
            self.launched.append((list(overrides), config.chunking.name))
        return [JobReturn(status=JobStatus.COMPLETED, _return_value=None) for _ in batch]


@pytest.fixture()
def sweeper(tmp_path):
    """A :class:`RagexpSweeper` over the real config tree, its launcher recording, compositions counted."""
    with COMPOSE_LOCK:
        register_schema()
        with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            counted: list[list[str]] = []
            compose_job = loader.load_sweep_config

            def counting(master_config, sweep_overrides):
                counted.append(list(sweep_overrides))
                return compose_job(master_config, sweep_overrides)

            loader.load_sweep_config = counting
            swept = RagexpSweeper(params={"retrieval": "bm25,dense"})
            swept.loader = ComposedOnce(loader)
            swept.hydra_context = HydraContext(config_loader=swept.loader, callbacks=None)
            swept.config = compose("config", overrides=[f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True)
            swept.launcher = RecordingLauncher(swept)
            yield swept, counted


def test_jobs_are_the_cross_product_in_command_line_order_params_first() -> None:
    assert job_overrides(["retrieval=bm25,dense", "chunking=fixed,recursive", "eval.ks=[1,3]"], None) == [
        ["retrieval=bm25", "chunking=fixed", "eval.ks=[1,3]"], ["retrieval=bm25", "chunking=recursive", "eval.ks=[1,3]"],
        ["retrieval=dense", "chunking=fixed", "eval.ks=[1,3]"], ["retrieval=dense", "chunking=recursive", "eval.ks=[1,3]"],
    ]


def test_each_jobs_config_is_composed_once(sweeper) -> None:
    swept, counted = sweeper
    swept.sweep(["chunking=fixed,recursive"])
    jobs = [["retrieval=bm25", "chunking=fixed"], ["retrieval=bm25", "chunking=recursive"],
            ["retrieval=dense", "chunking=fixed"], ["retrieval=dense", "chunking=recursive"]]
    assert swept.launcher.launched == [(job, job[1].split("=")[1]) for job in jobs]
    assert counted == jobs  # once each: the check before the batch; the launcher got those configs


def test_a_value_hydra_cannot_compose_stops_the_sweep_before_any_job(sweeper) -> None:
    swept, _ = sweeper
    with pytest.raises(ConfigCompositionException):
        swept.sweep(["chunking=fixed,no_such_chunking"])
    assert swept.launcher.launched == []


def test_ragexp_run_sweeps_with_it() -> None:
    config = compose_config([], return_hydra_config=True)
    assert config.hydra.sweeper._target_ == f"{RagexpSweeper.__module__}.{RagexpSweeper.__name__}"
