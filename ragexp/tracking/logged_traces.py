"""Traces for runs already in the store: a sweep's best and tied runs, and ``ragexp traces RUN_ID``.

A logged run holds everything its traces need but the passage texts: its ``ragexp_results.json``
and its ``config/resolved.yaml``. The config is read through the one gate
(:func:`ragexp.evaluation.saved_config.read_run_config`: the store is untrusted data), the data are
prepared as the run prepared them (:func:`ragexp.evaluation.prepared.prepare_data`: the chunks come
from the stage cache when present), and the eval set must still have the run's fingerprint, else
the traces would show another eval set's gold. Then :func:`ragexp.tracking.traces.log_run_traces`
writes them, exactly as a run logging its own.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from mlflow.tracking import MlflowClient

from ragexp.errors import RagexpInputError
from ragexp.evaluation.prepared import PreparedData, prepare_data
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.runtime.stage_cache import StageCache
from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.saved_config import read_run_config
from ragexp.tracking import store
from ragexp.tracking.trace_content import Passages
from ragexp.tracking.traces import TAG_TRACES, log_run_traces, reranks

#: Prepared data by what determines it (dataset, chunking, eval options), shared by a sweep's runs.
Prepared = Callable[[JobSpec], PreparedData]


def prepared_cache(cache_dir: str) -> Prepared:
    """``prepare(spec)``: :func:`prepare_data` once per distinct dataset, chunking and eval config."""
    seen: dict[str, PreparedData] = {}

    def prepare(spec: JobSpec) -> PreparedData:
        from omegaconf import OmegaConf

        key = json.dumps(OmegaConf.to_container(OmegaConf.masked_copy(spec.config, ["dataset", "chunking", "eval"]),
                                                resolve=True), sort_keys=True, default=str)
        if key not in seen:
            seen[key] = prepare_data(spec, StageCache(cache_dir), progress=False)
        return seen[key]

    return prepare


def trace_logged_run(client: MlflowClient, run_id: str, cache_dir: str, *, results: RunResults | None = None,
                     prepare: Prepared | None = None, artifacts_root: Path | None = None) -> int:
    """Log one trace per query of the logged run ``run_id`` (module docstring); returns how many
    the store holds. ``results``: its results when already read; ``prepare``: shared prepared data."""
    run = client.get_run(run_id)
    with tempfile.TemporaryDirectory(prefix="ragexp-traces-") as scratch:
        saved = store.download_artifact(run_id, store.CONFIG_ARTIFACT, client.tracking_uri, artifacts_root,
                                        dst_dir=Path(scratch) / "config")
        spec = read_run_config(saved, tracking_uri=client.tracking_uri, cache_dir=cache_dir)
        if results is None:
            results = RunResults.load(store.download_artifact(run_id, ARTIFACT_NAME, client.tracking_uri, artifacts_root,
                                                              dst_dir=Path(scratch) / "results"))
    data = (prepare or prepared_cache(cache_dir))(spec)
    if data.evalset.fingerprint() != results.meta.get("evalset_fingerprint"):
        raise RagexpInputError(f"the eval set of run {run_id} changed since it ran (fingerprint "
                               f"{str(results.meta.get('evalset_fingerprint'))[:16]} then, {data.evalset.fingerprint()[:16]} "
                               "now); its traces would show other gold, so none are logged", field="RUN_ID")
    return log_run_traces(client, run.info.experiment_id, run_id, results, data.evalset,
                          Passages(data.chunks_by_id, data.corpus), reranked=reranks(spec.config))


def has_traces(client: MlflowClient, run_id: str) -> bool:
    """Whether ragexp logged traces for the run (its :data:`~ragexp.tracking.traces.TAG_TRACES` tag)."""
    return TAG_TRACES in client.get_run(run_id).data.tags
