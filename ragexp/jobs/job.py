"""One job: a checked job spec in, an evaluated and logged run out, in the shape of a
lightning-hydra-template task: build from the spec, run, log.

:func:`run_job` is every evaluation (``ragexp run``'s sweep jobs, ``ragexp reproduce``); where the
run goes in MLflow is one value, :class:`LogTo` (``None``: evaluate and save only).
:func:`log_saved_run` is ``ragexp upload``: results computed earlier are logged, nothing is built
or evaluated. Both take a :class:`~ragexp.evaluation.job_spec.JobSpec`, which only the one gate
makes (:func:`~ragexp.evaluation.job_spec.job_spec`: secrets refused; every ``_target_`` a
registered class fitting its schema; path fields, thresholds; endpoints and key variables named
here, :mod:`ragexp.config.endpoints`): a job checks nothing twice and starts no work unchecked.

Order, so that bad input fails before any work and a store outage loses nothing:
the spec (checked) -> build the components (a bad parameter fails here,
before the store or the cache is touched) -> load and chunk the data (a missing eval set fails
here, before a store is created) -> connect to the store -> a black-box system: ask it every query
(:mod:`ragexp.systems.fetch`) ->
find (create if new) the eval set's experiment (:mod:`ragexp.tracking.experiments`) -> skip when
a FINISHED run has the same config hash and cost settings (sweeps with ``resume=true``; the sweep's
parent records the run reused, :mod:`ragexp.tracking.sweep_runs`) -> evaluate -> name the run
from its sweep axes (:mod:`ragexp.tracking.run_names`) -> save the results to the job's output
folder -> log them to MLflow (:func:`log_run`, retried; when the store stays away the error says
how to upload the saved folder later). The logged run starts when the job started, so its
duration is the job's work, and is tagged with where its config came from (``ragexp.config_source``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from ragexp.cost import memory
from ragexp.cost.settings import settings_key
from ragexp.data.dataset import load_dataset
from ragexp.datamodel import EvalSet
from ragexp.errors import RagexpInputError, TrackingUnavailable
from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.pipeline import build_pipeline
from ragexp.evaluation.prepared import PreparedData, prepare_data
from ragexp.evaluation.results import RunResults
from ragexp.evaluation.runner import RunOutput, config_hash, execute, semantic_config
from ragexp.evaluation.system_step import fetch_responses
from ragexp.runtime import interrupt, progress
from ragexp.runtime.stage_cache import StageCache
from ragexp.tracking import experiments, run_names, store, sweep_runs
from ragexp.tracking.run_logger import log_evaluation, save_local
from ragexp.tracking.trace_content import Passages
from ragexp.tracking.traces import traces_now

log = logging.getLogger("ragexp")

LOG_ATTEMPTS = 3


@dataclass(frozen=True)
class LogTo:
    """Where a job's run goes in MLflow: ``experiment_id`` (default: the eval set's experiment,
    ``tracking.experiment`` when set), a sweep's ``parent_run_id`` and ``axes`` (the run is named
    by its values on them and tagged ``axis.<key>``), extra ``tags``, a ``run_name`` replacing the
    derived one, and ``resume``: skip the job when a FINISHED run has its config hash (and measured its cost the same way)."""

    experiment_id: str | None = None
    parent_run_id: str | None = None
    axes: Sequence[str] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    run_name: str | None = None
    resume: bool = False


@dataclass
class JobResult:
    """``output`` is ``None`` when the job was skipped because ``run_id`` already holds its results."""

    output: RunOutput | None
    run_id: str | None
    evalset: EvalSet | None = None

    @property
    def skipped(self) -> bool:
        return self.output is None


def run_job(spec: JobSpec, *, output_dir: Path, cache: StageCache | None = None, log_to: LogTo | None = LogTo()) -> JobResult:
    """Evaluate the pipeline ``spec`` describes, save it to ``output_dir`` and log it (module
    docstring). ``cache`` defaults to the config's ``cache_dir``; ``log_to=None`` evaluates and saves
    without touching MLflow."""
    _require_spec(spec)
    cfg, overrides = spec.config, list(spec.overrides)
    started_at = time.time()
    memory.reset_peak()  # the run's peak RSS (cost.peak_rss_bytes) counts from here, not from the process start
    interrupt.check()  # a SIGTERM whose raise was lost still stops the sweep before its next job
    progress.set_enabled(cfg.progress)
    cache = cache or StageCache(Path(cfg.cache_dir))
    if log_to is not None:  # a store refused before the data load writes anything to the cache
        store.check_store(cfg.tracking.uri)
    started = time.perf_counter()
    loaded = load_dataset(cfg.dataset, cache)  # stale gold refuses here, before any model is built
    loading_s = time.perf_counter() - started
    pipeline = build_pipeline(spec, cache)
    started = time.perf_counter()
    data = prepare_data(spec, cache, progress=cfg.progress, chunked=pipeline.system is None, loaded=loaded)
    prepare_s = loading_s + time.perf_counter() - started
    # only now: a run refused for its data (a missing eval set, stale gold) creates no store
    client = store.connect(cfg.tracking.uri, cfg.tracking.connect_timeout_s) if log_to is not None else None
    # a black-box system is asked before anything is created in the store: when it fails, nothing is left behind
    responses = fetch_responses(spec, data, pipeline.system, cache) if pipeline.system is not None else None
    experiment_id = None
    values = run_names.axis_values(overrides, log_to.axes if log_to else ())
    if client is not None:  # only now: a run refused for bad data leaves no experiment behind
        if log_to.experiment_id:  # a given one (reproduce); ensure_for_evalset checks the one it finds
            experiment_id = log_to.experiment_id
            store.check_experiment_location(client, experiment_id)
        else:
            experiment_id = experiments.ensure_for_evalset(client, cfg.tracking.experiment, data.evalset)
        existing = (store.find_finished_run(client, experiment_id, config_hash(cfg, data), settings_key(cfg.get("cost")))
                    if log_to.resume else None)
        if existing:
            log.info("resume: skipping, run %s already FINISHED with this config hash and cost settings", existing)
            if log_to.parent_run_id:  # the sweep's summary covers the run this job reused
                sweep_runs.record_reused(client, log_to.parent_run_id, existing, values)
            return JobResult(None, existing, data.evalset)
    output = execute(spec, cache=cache, data=data, pipeline=pipeline, run_name=_run_name(cfg, data, values, log_to),
                     responses=responses)
    output.timings["prepare_s"] = prepare_s
    output.results.meta.update(started_at=started_at, finished_at=time.time())
    save_local(output_dir, cfg, output, overrides)  # first: the results survive a store outage
    if client is None:
        return JobResult(output, None, data.evalset)
    experiments.describe_once(client, experiment_id, data.corpus, data.evalset)
    run_id = log_run(
        lambda: log_evaluation(client, experiment_id, cfg, output, data.evalset, overrides=overrides,
                               parent_run_id=log_to.parent_run_id,
                               tags={**run_names.axis_tags(values), **log_to.tags, **_source_tag(spec)},
                               saved=output_dir, passages=Passages(output.units or data.chunks_by_id, data.corpus),
                               traces=traces_now(cfg.tracking, in_sweep=log_to.parent_run_id is not None)),
        output_dir,
    )
    return JobResult(output, run_id, data.evalset)


def _run_name(cfg: DictConfig, data: PreparedData, values: Mapping[str, str], log_to: LogTo | None) -> str:
    """``log_to.run_name``, else the name the sweep axes' values (and a sample's size) give."""
    if log_to is not None and log_to.run_name:
        return log_to.run_name
    sample = len(data.evalset.items) if "sampled" in data.evalset.meta else None
    return run_names.run_name(semantic_config(cfg), data.chunking_label, values, sample)


def log_saved_run(spec: JobSpec, results: RunResults, folder: Path, tags: Mapping[str, str]) -> JobResult:
    """Log results saved in ``folder`` while the store was unreachable (``ragexp upload``): nothing
    is built or evaluated; the eval set is reloaded only to log it as the run's input, and must
    still have the saved fingerprint."""
    from ragexp.evaluation.results import ARTIFACT_NAME

    _require_spec(spec)
    cfg, overrides = spec.config, list(spec.overrides)
    data = prepare_data(spec, StageCache(cfg.cache_dir), progress=cfg.progress)  # the chunks the traces show
    corpus, evalset = data.corpus, data.evalset  # sampled as the run was: a sample has its own fingerprint
    if evalset.fingerprint() != results.meta.get("evalset_fingerprint"):
        raise RagexpInputError("the eval set changed since this run was computed; refusing to log it against the new one",
                               file=folder / ARTIFACT_NAME, field="meta.evalset_fingerprint")
    client: MlflowClient = store.connect(cfg.tracking.uri, cfg.tracking.connect_timeout_s)
    experiment_id = experiments.ensure_for_evalset(client, cfg.tracking.experiment, evalset)
    experiments.describe_once(client, experiment_id, corpus, evalset)
    output = RunOutput(results, results.meta["run_name"], results.meta["config_hash"], results.meta.get("timings", {}))
    run_id = log_run(
        lambda: log_evaluation(client, experiment_id, cfg, output, evalset, overrides=overrides, parent_run_id=None,
                               tags={**tags, **_source_tag(spec)}, ended_at=results.meta.get("finished_at"),
                               passages=Passages(data.chunks_by_id, corpus), traces=traces_now(cfg.tracking, in_sweep=False)),
        folder,
    )
    return JobResult(output, run_id, evalset)


def _require_spec(spec: object) -> None:
    if not isinstance(spec, JobSpec):
        raise TypeError(f"a job takes a JobSpec from ragexp.evaluation.job_spec.job_spec(cfg, ...), not {type(spec).__name__}")


def _source_tag(spec: JobSpec) -> dict[str, str]:
    return {store.TAG_CONFIG_SOURCE: spec.source.value}


def log_run(log_once: Callable[[], str], output_dir: Path, attempts: int = LOG_ATTEMPTS, backoff_s: float = 2.0) -> str:
    """Log to MLflow, retrying with backoff; when the store stays unreachable, say where the
    results are kept and how to upload them later (``ragexp upload DIR``), and fail the job."""
    for attempt in range(1, attempts + 1):
        try:
            return log_once()
        except RagexpInputError:
            raise
        except Exception as err:  # the store went away mid-run: transport and store errors alike
            interrupt.check()  # unless a termination signal caused it: then stop, do not retry
            if attempt == attempts:
                raise TrackingUnavailable(
                    f"could not log to the tracking store after {attempts} attempts ({type(err).__name__}: "
                    f"{str(err).splitlines()[0][:200] if str(err) else ''}); results are kept in {output_dir}; "
                    f"upload them later with: ragexp upload {output_dir}"
                ) from err
            log.warning("logging failed (attempt %d/%d): %s; retrying", attempt, attempts, err)
            time.sleep(backoff_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
