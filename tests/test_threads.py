"""Torch threads for local models: sized to the cores the job owns divided by the sweep's
parallel jobs, set deliberately, bad values refused with the field named."""

from __future__ import annotations

import os

import pytest

from ragexp.errors import RagexpInputError
from ragexp.runtime import threads
from ragexp.runtime.threads import (
    PARALLEL_JOBS_ENV,
    auto_threads,
    configure_threads,
    configured_threads,
    resolve_threads,
)

CORES = len(os.sched_getaffinity(0))


@pytest.fixture()
def no_hydra():
    from hydra.core.hydra_config import HydraConfig

    previous = HydraConfig.instance().cfg
    HydraConfig.instance().cfg = None
    yield
    HydraConfig.instance().cfg = previous


def test_auto_gives_each_parallel_job_its_share_of_the_owned_cores(monkeypatch, no_hydra):
    monkeypatch.delenv(PARALLEL_JOBS_ENV, raising=False)
    assert auto_threads() == CORES
    monkeypatch.setenv(PARALLEL_JOBS_ENV, "2")
    assert auto_threads() == max(1, CORES // 2)
    monkeypatch.setenv(PARALLEL_JOBS_ENV, str(CORES * 4))
    assert auto_threads() == 1  # never 0


def test_a_joblib_sweep_job_reads_n_jobs_from_its_hydra_config(monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from ragexp.config.compose import CONFIG_DIR
    from ragexp.config.schema import register_schema

    monkeypatch.delenv(PARALLEL_JOBS_ENV, raising=False)
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], return_hydra_config=True)
    previous = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(cfg)
    try:
        assert threads.parallel_jobs(CORES) == 2 and auto_threads() == max(1, CORES // 2)
        monkeypatch.setenv(PARALLEL_JOBS_ENV, "1")  # the environment variable wins
        assert auto_threads() == CORES
    finally:
        HydraConfig.instance().cfg = previous


@pytest.mark.parametrize(("n_jobs", "jobs"), [(-1, 8), (-2, 7), (3, 3), (0, 1)])
def test_negative_n_jobs_count_like_joblib(monkeypatch, n_jobs, jobs):
    monkeypatch.delenv(PARALLEL_JOBS_ENV, raising=False)
    monkeypatch.setattr(threads, "_launcher_n_jobs", lambda: n_jobs)
    assert threads.parallel_jobs(8) == jobs


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True])
def test_bad_thread_counts_name_the_field(bad):
    with pytest.raises(RagexpInputError) as caught:
        resolve_threads(bad)
    assert caught.value.field == "threads"


def test_a_bad_parallel_jobs_variable_names_it(monkeypatch):
    monkeypatch.setenv(PARALLEL_JOBS_ENV, "lots")
    with pytest.raises(RagexpInputError) as caught:
        auto_threads()
    assert caught.value.field == PARALLEL_JOBS_ENV


def test_configure_sets_torch_and_records_the_value():
    import torch

    before = torch.get_num_threads()
    try:
        assert configure_threads(1) == 1 and torch.get_num_threads() == 1 and configured_threads() == 1
    finally:
        torch.set_num_threads(before)
