"""Torch threads for local models: sized to the cores the job owns divided by the sweep's
parallel jobs, set deliberately, bad values refused with the field named."""

from __future__ import annotations

import os
import time

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


def test_busy_elsewhere_is_the_owned_cpus_busy_time_less_this_process(monkeypatch):
    # two readings of the owned CPUs' (busy, all) ticks 0.5 s apart on 2 cores: 100 ticks in all,
    # 80 busy, of which this process used 30 ticks (0.3 s at 100 ticks/s): 50/100 * 2 = 1.0 core
    readings = iter([(1000, 5000), (1080, 5100)])
    times = iter([os.times_result((1.0, 0.2, 0, 0, 0)), os.times_result((1.2, 0.3, 0, 0, 0))])
    monkeypatch.setattr(threads, "_owned_cpu_jiffies", lambda: next(readings))
    monkeypatch.setattr(threads.os, "times", lambda: next(times))
    monkeypatch.setattr(threads.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(threads, "owned_cores", lambda: 2)
    assert threads.cores_busy_elsewhere(window_s=0) == pytest.approx(1.0)


def test_busy_elsewhere_reads_zero_where_proc_stat_cannot_be_read(monkeypatch):
    monkeypatch.setattr(threads, "_owned_cpu_jiffies", lambda: None)
    assert threads.cores_busy_elsewhere(window_s=0) == 0.0


def test_owned_cpu_ticks_come_from_proc_stat():
    ticks = threads._owned_cpu_jiffies()
    assert ticks is not None and 0 <= ticks[0] <= ticks[1]


@pytest.mark.parametrize(("busy", "expected"), [(0.0, 4), (0.4, 4), (1.2, 3), (2.6, 1), (9.0, 1)])
def test_load_aware_threads_leave_the_cores_busy_elsewhere(monkeypatch, busy, expected):
    monkeypatch.setattr(threads, "owned_cores", lambda: 4)
    monkeypatch.setattr(threads, "auto_threads", lambda: 4)
    monkeypatch.setattr(threads, "cores_busy_elsewhere", lambda: busy)
    assert threads.load_aware_threads() == expected


def test_load_aware_threads_never_exceed_the_sweep_jobs_share(monkeypatch):
    monkeypatch.setattr(threads, "owned_cores", lambda: 4)
    monkeypatch.setattr(threads, "auto_threads", lambda: 2)
    monkeypatch.setattr(threads, "cores_busy_elsewhere", lambda: 0.0)
    assert threads.load_aware_threads() == 2


def test_recheck_measures_at_most_every_recheck_seconds_and_sets_ints_as_given(monkeypatch):
    import torch

    measured = []
    monkeypatch.setattr(threads, "load_aware_threads", lambda: measured.append(1) or 1)
    monkeypatch.setattr(threads, "_load_aware", None)
    before = torch.get_num_threads()
    try:
        assert threads.recheck_threads("auto") == 1 and threads.recheck_threads("auto") == 1
        assert len(measured) == 1  # the second batch within RECHECK_S reuses the measurement
        assert threads.recheck_threads(2) == 2 and torch.get_num_threads() == 2 and len(measured) == 1
        monkeypatch.setattr(threads, "_load_aware", (time.monotonic() - threads.RECHECK_S - 1, 1))
        assert threads.recheck_threads("auto") == 1 and len(measured) == 2
    finally:
        torch.set_num_threads(before)


def test_a_spinning_process_is_seen_busy():
    import subprocess
    import sys

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert threads.cores_busy_elsewhere(window_s=1.0) >= 0.5  # the spinner, or others busier still
    finally:
        spinner.kill()
        spinner.wait()
