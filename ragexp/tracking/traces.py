"""Every eval query of a run as an MLflow trace, linked to the run (GenAI -> Evaluation runs).

:func:`log_run_traces` writes one trace per query of a :class:`~ragexp.evaluation.results.RunResults`
(content: :mod:`~ragexp.tracking.trace_content`) through MLflow's public tracing API: the root span
with ``mlflow.start_span(run_id=...)`` (the trace's ``mlflow.sourceRun``), the children with
``mlflow.start_span_no_context``, and the assessments with ``mlflow.log_assessment`` while the
root is the active span, which MLflow keeps in memory and writes with the trace in the same store
call instead of one call per assessment. MLflow exports traces asynchronously in batches
(:data:`SPAN_BATCH`: spans of many traces in one store call, ``MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE``
unless the user set it); :func:`log_run_traces` flushes (``mlflow.flush_trace_async_logging``) and
counts the run's traces in the store before it returns, so the caller closes the run FINISHED only
after its traces are written. MLflow only warns about a trace it failed to write, so the count is
compared with the number of queries: ``ragexp.traces`` on the run says ``<written> of <queries>``,
and a shortfall is logged as a warning (the run's metrics and per-query table do not depend on it).

Span times are when the trace was logged, not the query's latency: ragexp retrieves, generates and
judges in batches and does not time single queries (a run's stage times are its ``time/`` metrics).

Which runs get traces, ``tracking.traces`` (:class:`TraceMode`): ``all`` (every run), ``best`` (the
default: a single run gets them; in a sweep, the runs best or tied on hit rate@5 get them
when the sweep ends, :mod:`~ragexp.tracking.sweep_summary`; ``benchmarks/bench_traces.py`` measures
why), ``none``. ``ragexp traces RUN_ID`` adds them to any run later (an old run, a sweep's other runs).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import mlflow
from mlflow.entities.trace_location import MlflowExperimentLocation
from mlflow.tracking import MlflowClient

from ragexp.config.schema import TraceMode
from ragexp.datamodel import EvalSet
from ragexp.evaluation.results import RunResults
from ragexp.runtime import progress
from ragexp.tracking import store
from ragexp.tracking.trace_content import QUERY_TAG, Passages, QueryTrace, query_trace

log = logging.getLogger(__name__)

#: Run tag: ``<traces written> of <queries>`` (absent: the run has no traces).
TAG_TRACES = "ragexp.traces"
#: Spans per store call of MLflow's batch exporter (its default is 5: one call per trace or two).
SPAN_BATCH = 512
_BATCH_ENV = "MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE"
#: One export worker: MLflow's default of 10 lets a batch of spans race the creation of its
#: traces, and the sqlite store then drops the spans of the traces it lost (seen: 11 of 148).
EXPORT_WORKERS = 1
_WORKERS_ENV = "MLFLOW_ASYNC_TRACE_LOGGING_MAX_WORKERS"
#: search_traces page size when reading a run's traces back.
PAGE = 500


def _configure_export() -> None:
    """Batch spans of many traces into one store call, unless the user configured MLflow's knob.
    MLflow reads it when it builds its tracer provider (after a tracking-URI change too)."""
    os.environ.setdefault(_BATCH_ENV, str(SPAN_BATCH))
    os.environ.setdefault(_WORKERS_ENV, str(EXPORT_WORKERS))


def _emit(trace: QueryTrace, experiment_id: str, run_id: str) -> None:
    location = MlflowExperimentLocation(experiment_id=experiment_id)
    with mlflow.start_span(trace.root.name, span_type=trace.root.span_type, trace_destination=location,
                           run_id=run_id) as root:
        root.set_inputs(trace.root.inputs)
        root.set_attributes(trace.root.attributes)
        mlflow.update_current_trace(tags=trace.tags)
        for child in trace.children:
            span = mlflow.start_span_no_context(child.name, span_type=child.span_type, parent_span=root,
                                                inputs=child.inputs, attributes=child.attributes or None)
            for assessment in trace.span_assessments.get(child.name, ()):
                assessment.span_id = span.span_id
                mlflow.log_assessment(root.trace_id, assessment)
            span.end(outputs=child.outputs)
        for assessment in trace.assessments:
            mlflow.log_assessment(root.trace_id, assessment)
        root.set_outputs(trace.root.outputs)


def log_run_traces(client: MlflowClient, experiment_id: str, run_id: str, results: RunResults, evalset: EvalSet,
                   source: Passages, *, reranked: bool) -> int:
    """Write one trace per query of ``results`` to ``run_id`` (module docstring); returns how many
    the store holds for the run afterwards. The run's tag :data:`TAG_TRACES` records it."""
    store.check_experiment_location(client, experiment_id)  # where MLflow keeps the traces' data
    _configure_export()
    mlflow.set_tracking_uri(client.tracking_uri)  # tracing writes to the global URI
    items = {item.id: item for item in evalset.items}
    run_name = results.meta.get("run_name", run_id)
    rows = results.per_query
    for row in progress.bar(rows, desc="traces", unit="query"):
        _emit(query_trace(row, items.get(row.query_id), source, results.meta, run_name, reranked=reranked,
                          evalset_name=evalset.name), experiment_id, run_id)
    mlflow.flush_trace_async_logging()
    written = len(trace_ids(client, experiment_id, run_id))
    client.set_tag(run_id, TAG_TRACES, f"{written} of {len(rows)}")
    if written < len(rows):
        log.warning("only %d of %d query traces of run %s reached the store (MLflow's export warnings above say why)",
                    written, len(rows), run_id)
    return written


def trace_ids(client: MlflowClient, experiment_id: str, run_id: str) -> dict[str, str]:
    """``{query id: trace id}`` of the traces of ``run_id`` (its newest trace per query)."""
    found: dict[str, tuple[int, str]] = {}
    token = None
    while True:
        page = client.search_traces(locations=[experiment_id], run_id=run_id, max_results=PAGE, page_token=token,
                                    include_spans=False)
        for trace in page:
            query_id = trace.info.tags.get(QUERY_TAG)
            if query_id is not None and (query_id not in found or trace.info.request_time > found[query_id][0]):
                found[query_id] = (trace.info.request_time, trace.info.trace_id)
        token = page.token
        if not token:
            return {query_id: trace_id for query_id, (_, trace_id) in found.items()}


def mode_of(tracking: Mapping[str, Any]) -> TraceMode:
    """The run config's ``tracking.traces`` (``best`` when a saved config predates it)."""
    value = tracking.get("traces") or TraceMode.best
    return TraceMode(getattr(value, "value", value))


def traces_now(tracking: Mapping[str, Any], *, in_sweep: bool) -> bool:
    """Whether a run logs its traces as it is logged: ``all``, or ``best`` outside a sweep (a
    sweep's best and tied runs get theirs when it ends)."""
    mode = mode_of(tracking)
    return mode == TraceMode.all or (mode == TraceMode.best and not in_sweep)


def reranks(cfg: Mapping[str, Any]) -> bool:
    """Whether a run config's pipeline reranks (a reranker with a component to build)."""
    reranker = cfg.get("reranker")
    return bool(reranker and reranker.get("_target_"))

