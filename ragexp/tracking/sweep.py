"""A Hydra multirun is one MLflow parent run with one child run per job.

:class:`MlflowSweepCallback` (wired in ``conf/config.yaml`` under ``hydra.callbacks``) runs in the
launching process. Before anything is written, every job's config is checked through the job-spec
gate (:func:`~ragexp.evaluation.job_spec.job_spec`; ragexp's sweeper hands the composed configs to
:meth:`MlflowSweepCallback.on_sweep_composed`): a bad value in the last config refuses the sweep
with one line naming that job and the field, and leaves no store, parent run or sweep folder.
Only then does it create the tracking store and the experiment ONCE, before any job
starts (parallel workers creating a fresh sqlite store at once lose runs; the eval set is loaded
first, so a missing one creates no store), open the parent run
and hand its id to every job inside the job's own config (``hydra.job.env_set.RAGEXP_PARENT_RUN``,
which every launcher ships to its workers, on this machine or another; a job also sees it as that
environment variable). When the sweep ends, the launching process closes the parent FINISHED when
every run it covers finished (its children and the runs its resumed jobs reused,
:mod:`~ragexp.tracking.sweep_runs`), else FAILED, with the counts as metrics, after the summary (and, with
``tracking.traces=best``, the best and tied runs' traces: :mod:`~ragexp.tracking.sweep_summary`); an interrupted sweep's parent
is closed KILLED by ``ragexp run`` (:func:`close_open_parent`); a parent whose process died
without closing it (SIGKILL) is closed KILLED when the same sweep is launched again
(:func:`close_stale_parents`).
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ragexp import __version__
from ragexp.errors import RagexpInputError, SweepRefused
from ragexp.runtime import interrupt
from ragexp.runtime.fingerprint import stable_hash
from ragexp.config.schema import TraceMode
from ragexp.tracking import experiments, run_names, store, sweep_runs, sweep_summary, traces

PARENT_ENV = "RAGEXP_PARENT_RUN"
AXES_ENV = "RAGEXP_SWEEP_AXES"
log = logging.getLogger(__name__)


def _refused_on_bad_input(hook):
    """``hook`` with its :class:`RagexpInputError` (an unreachable store, a bad experiment) raised as
    :class:`SweepRefused`: Hydra would print its own ``UserWarning`` and launch the jobs anyway."""

    @functools.wraps(hook)
    def refusing(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except RagexpInputError as err:
            raise SweepRefused(err) from None

    return refusing


class MlflowSweepCallback(Callback):
    @_refused_on_bad_input
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra sets its global config only per job; the launching process needs it here so that
        # ``${hydra:...}`` interpolations (``cache_dir``) resolve while the jobs are checked.
        HydraConfig.instance().set_config(config)
        _validate_sweep(config)  # before any job's config is composed
        if config.hydra.sweeper.get("_target_") != RAGEXP_SWEEPER:  # no on_sweep_composed: open the parent now
            _open_parent_run(config)

    @_refused_on_bad_input
    def on_sweep_composed(self, config: DictConfig, jobs: Sequence[tuple[Sequence[str], DictConfig]]) -> None:
        """Every job's config through the job-spec gate, then the store and the parent run, whose
        id every job's config is given (ragexp's sweeper calls this before the first job starts)."""
        axes = run_names.sweep_axes(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        for number, (overrides, job_config) in enumerate(jobs, start=1):
            _check_job_config(job_config, overrides, f"sweep job {number} of {len(jobs)}", axes)
        extra = _open_parent_run(config)
        for _, job_config in jobs:
            with read_write(job_config.hydra), open_dict(job_config.hydra):
                job_config.hydra.overrides.hydra.extend(extra)
                job_config.hydra.job.env_set.update({PARENT_ENV: _open_parent.run_id, AXES_ENV: ",".join(axes)})

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        close_open_parent()


#: The sweeper that calls :meth:`MlflowSweepCallback.on_sweep_composed` (``conf/config.yaml``).
RAGEXP_SWEEPER = "hydra_plugins.ragexp_sweeper.ragexp_sweeper.RagexpSweeper"


def _check_job_config(job_config: DictConfig, overrides: Sequence[str], job: str, axes: Sequence[str]) -> None:
    """One job's composed config through the gate its job will pass (without its ``hydra`` node,
    as Hydra hands it to the job); a refusal names the job and its swept values."""
    from ragexp.evaluation.job_spec import job_spec

    task = OmegaConf.masked_copy(job_config, [key for key in job_config.keys() if key != "hydra"])
    try:
        job_spec(task, list(overrides))
    except RagexpInputError as err:
        values = " ".join(f"{axis}={value}" for axis, value in run_names.axis_values(overrides, axes).items())
        raise SweepRefused(f"{job} ({values or ' '.join(overrides)}): {err}; nothing was run") from None


def _open_parent_run(config: DictConfig) -> list[str]:
    """The store, the experiment and the sweep's open parent run; the overrides that hand its id
    and axes to every job (appended to ``hydra.overrides.hydra`` too)."""
    experiment_id, client = experiments.ensure_for_config(
        lambda: store.connect(config.tracking.uri, config.tracking.connect_timeout_s), config)
    sweep_dir = Path(config.hydra.sweep.dir)
    overrides = list(config.hydra.overrides.task)
    axes = run_names.sweep_axes(overrides, config.hydra.sweeper.get("params"))
    key = sweep_key(overrides)
    close_stale_parents(client, experiment_id, key)
    run = client.create_run(
        experiment_id,
        run_name=f"sweep {sweep_dir.name}",
        tags={store.TAG_KIND: "sweep", store.TAG_VERSION: __version__, store.TAG_SWEEP_AXES: ",".join(axes),
              **launcher_tags(key), **_budget_tags(config)},
    )
    store.log_batched(client, run.info.run_id, params={"sweep.overrides": " ".join(overrides) or "(none)"})
    # Launchers compose each job's config from hydra.overrides.hydra plus the job's overrides, so
    # this override reaches every job, also where the sweep dir is not at the same path as here
    # (a Ray node with another working directory, hydra.job.chdir=true with a relative sweep dir).
    extra = [f"++hydra.job.env_set.{PARENT_ENV}='{run.info.run_id}'", f"++hydra.job.env_set.{AXES_ENV}='{','.join(axes)}'"]
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.overrides.hydra.extend(extra)
    global _open_parent
    review = config.tracking.judge_review
    _open_parent = _OpenParent(config.tracking.uri, config.tracking.connect_timeout_s, run.info.run_id, experiment_id,
                               float(review.min_kappa), str(review.unverified),
                               trace_best=traces.mode_of(config.tracking) == TraceMode.best,
                               cache_dir=str(config.cache_dir))
    log.info("MLflow parent run %s in experiment %s", run.info.run_id, experiment_id)
    return extra


BUDGET_SEPARATOR = " ; "


def _budget_tags(config: DictConfig) -> dict[str, str]:
    """The sweep's ``cost.budgets`` (checked by :func:`_validate_sweep`), for the summary to apply."""
    budgets = list(config.get("cost", {}).get("budgets") or [])
    return {sweep_summary.TAG_BUDGETS: BUDGET_SEPARATOR.join(budgets)} if budgets else {}


def _validate_sweep(config: DictConfig) -> None:
    """The job checks (:func:`ragexp.evaluation.checks.check_job`) on the sweep's config before any
    value is swept: bad input shared by every job (a secret in a config file, an overlap not below
    the size, a missing eval set) stops the sweep before it writes anything. A top-level group
    with a swept key is screened for secrets only: its values here are no job's (each job checks
    its own)."""
    from ragexp.evaluation.checks import check_job

    review = config.tracking.judge_review
    if review.unverified not in ("warn", "fail") or not -1 <= review.min_kappa <= 1:
        raise SweepRefused(RagexpInputError(f"expected unverified: warn | fail and min_kappa in [-1, 1], got "
                                            f"{review.unverified!r} and {review.min_kappa!r}",
                                            field="tracking.judge_review"))
    task = OmegaConf.masked_copy(config, [key for key in config.keys() if key != "hydra"])
    overrides = list(config.hydra.overrides.task)
    axes = run_names.sweep_axes(overrides, config.hydra.sweeper.get("params"))
    swept = frozenset(axis.replace("/", ".").split(".")[0] for axis in axes)
    try:
        store.check_tracking_uri(config.tracking.uri)  # before any job is composed: a refused store starts nothing
        check_job(task, overrides, skip=swept)
    except RagexpInputError as err:
        raise SweepRefused(err) from None


@dataclass(frozen=True)
class _OpenParent:
    uri: str
    timeout_s: float
    run_id: str
    experiment_id: str
    min_kappa: float = 0.4  # tracking.judge_review: when a judge metric counts as verified ...
    on_unverified: str = "warn"  # ... and whether an unverified one fails the sweep
    trace_best: bool = False  # tracking.traces=best: the best and tied runs get their traces at the end
    cache_dir: str = ""


_open_parent: _OpenParent | None = None  # the parent this process opened and has not closed yet


def _close_parent(parent: _OpenParent, status: str | None = None) -> None:
    """Log the counts and close the parent: ``status``, else FINISHED when every run it covers
    finished (its children and the runs its jobs reused, :func:`~ragexp.tracking.sweep_runs.covered_runs`;
    under ``tracking.judge_review.unverified=fail``, no judge metric unverified), else FAILED."""
    client = store.connect(parent.uri, parent.timeout_s)
    runs, reused = sweep_runs.covered_runs(client, parent.run_id)
    unverified = _summarize(client, parent, runs, reused) if status is None else []
    finished = sum(run.info.status == "FINISHED" for run in runs)
    if status is None:
        status = "FINISHED" if runs and finished == len(runs) else "FAILED"
        if unverified and parent.on_unverified == "fail":
            log.error("sweep marked FAILED: judge metrics unverified (%s); tracking.judge_review.unverified=fail",
                      ", ".join(unverified))
            status = "FAILED"
    with interrupt.deferred():  # a write cut short can leave the sqlite store locked and the run RUNNING
        store.log_batched(client, parent.run_id, metrics={"sweep.children": len(runs) - len(reused),
                                                          "sweep.children_finished": finished - len(reused),
                                                          "sweep.runs_reused": len(reused)})
        client.set_terminated(parent.run_id, status=status)


def _summarize(client: MlflowClient, parent: _OpenParent, runs: list, reused: list[str]) -> list[str]:
    """The parent's summary (:mod:`~ragexp.tracking.sweep_summary`) of ``runs`` (``reused``: those
    from earlier launches), returning its unverified judge metrics; a failure to draw it is
    reported and does not keep the sweep from closing."""
    tags = client.get_run(parent.run_id).data.tags
    axes = [a for a in tags.get(store.TAG_SWEEP_AXES, "").split(",") if a]
    budgets = [b for b in tags.get(sweep_summary.TAG_BUDGETS, "").split(BUDGET_SEPARATOR) if b]
    try:
        return sweep_summary.log_sweep_summary(client, parent.run_id, parent.experiment_id, runs, axes, budgets,
                                               min_kappa=parent.min_kappa,
                                               trace_cache_dir=parent.cache_dir if parent.trace_best else None,
                                               reused=reused)
    except Exception as err:  # noqa: BLE001 - the sweep's runs are logged; only the summary is missing
        log.warning("could not write the sweep summary to parent run %s: %s", parent.run_id, err)
        return []


def close_open_parent(status: str | None = None) -> str | None:
    """Close the parent run this process opened (see :func:`_close_parent` for ``status``; an
    interrupted sweep, whose ``on_multirun_end`` never runs, passes KILLED); returns its id, or
    ``None`` when no parent is open."""
    global _open_parent
    parent = _open_parent
    if parent is None:
        return None
    _close_parent(parent, status)
    _open_parent = None  # only now: an interrupt while the summary is drawn still finds it open
    return parent.run_id


TAG_SWEEP_KEY = "ragexp.sweep.key"
TAG_SWEEP_HOST = "ragexp.sweep.host"
TAG_SWEEP_PID = "ragexp.sweep.pid"
TAG_SWEEP_PROCESS_START = "ragexp.sweep.process_start"


def sweep_key(overrides: list[str]) -> str:
    """What makes two launches "the same sweep": the same task overrides (in any order) in the same
    experiment. Hydra's own overrides (``hydra.sweep.dir``, the launcher) do not count."""
    return stable_hash(sorted(overrides))


def launcher_tags(key: str) -> dict[str, str]:
    """The sweep key and the launching process (host, pid, process start time) of a parent run."""
    me = psutil.Process()
    return {TAG_SWEEP_KEY: key, TAG_SWEEP_HOST: socket.gethostname(), TAG_SWEEP_PID: str(me.pid),
            TAG_SWEEP_PROCESS_START: f"{me.create_time():.3f}"}


def _launcher_alive(tags: Mapping[str, str]) -> bool:
    """Whether the process that opened a parent still runs: a process with the recorded pid and
    start time on this host. A parent opened on another host is taken as alive (it cannot be checked)."""
    if tags.get(TAG_SWEEP_HOST) != socket.gethostname():
        return True
    try:
        process = psutil.Process(int(tags[TAG_SWEEP_PID]))
        return f"{process.create_time():.3f}" == tags.get(TAG_SWEEP_PROCESS_START)
    except (KeyError, ValueError, psutil.Error):
        return False


def close_stale_parents(client: MlflowClient, experiment_id: str, key: str) -> list[str]:
    """Close KILLED the RUNNING parents of the same sweep (:func:`sweep_key`) whose launching
    process is gone (SIGKILL, a crash, a power cut: nothing closed them); returns their ids."""
    running = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{TAG_SWEEP_KEY}` = '{key}' and attributes.status = 'RUNNING'",
        max_results=1000,
    )
    stale = [run.info.run_id for run in running if not _launcher_alive(run.data.tags)]
    for run_id in stale:
        client.set_terminated(run_id, status="KILLED")
        log.warning("sweep parent run %s of the same sweep was left RUNNING by a process that is gone; closed KILLED", run_id)
    return stale


def current_parent_run() -> str | None:
    """The parent run id when this process runs a job of a multirun, else ``None``."""
    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    parent = hydra_cfg.job.env_set.get(PARENT_ENV)
    return str(parent) if parent else None


def current_sweep_axes() -> list[str]:
    """The axes of the multirun this job belongs to (:func:`ragexp.tracking.run_names.sweep_axes`)."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return []
    return [axis for axis in str(HydraConfig.get().job.env_set.get(AXES_ENV) or "").split(",") if axis]

