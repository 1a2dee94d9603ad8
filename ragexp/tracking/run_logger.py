"""What one evaluated run writes to MLflow.

params: one readable label per component and the semantic config flattened to what the variant
uses (:mod:`~ragexp.tracking.run_names`), plus the run's constants (query and chunk counts, depths);
metrics: every aggregate and stage timing under its section prefix (``1_headline/``,
``retrieval/``, ``doc/``, ``generation/``, ``tag/<tag>/``, ``ci/``, ``time/``, ``black_box/``, ``cost/``;
:mod:`~ragexp.tracking.metric_names`); tags: config hash, corpus and eval-set fingerprints, eval-set
name and gold level, the embedding backend that encoded (``ragexp.embedding_backend``), the models' devices (``ragexp.devices``), code version, package versions, the sweep's axis values (``axis.<key>``),
``mlflow.runType=evaluation``; with a judge, its calibration next to faithfulness
(:func:`judge_fields`); artifacts: resolved config and Hydra overrides, the portable
``ragexp_results.json``, a black-box system's ``system/responses.jsonl`` and ``system/placements.jsonl``, the per-query table (MLflow's table artifact, flat columns: :func:`per_query_table`),
a recall@k curve (SVG: :mod:`~ragexp.tracking.recall_plot`); the eval set's MLflow evaluation dataset as the
run's input (:mod:`~ragexp.tracking.evalset_dataset`); with ``traces``, one trace per query with its
assessments (:mod:`~ragexp.tracking.traces`), written before the run is closed. The run spans
the job's work (its start time is the job's), not only the logging. The run is opened only after everything was
computed and is closed FINISHED only after the last write succeeded; a termination signal
received during the writes is held until they are done, then closes the run KILLED
(:mod:`ragexp.runtime.interrupt`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient
from mlflow.tracking.fluent import _create_dataset_input
from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS
from omegaconf import DictConfig, OmegaConf

from ragexp.chunking import make_chunker
from ragexp.config.schema import chunker_options
from ragexp.cost.settings import settings_key
from ragexp.datamodel import EvalSet, is_relevant
from ragexp.evaluation.checks import PIPELINE_GROUPS
from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult
from ragexp.evaluation.runner import RunOutput, semantic_config
from ragexp.judging.calibration.record import judge_key
from ragexp.judging.review_status import TAG_JUDGE_KEY
from ragexp.metrics.measure import at
from ragexp.models.device import devices_tag
from ragexp.runtime import interrupt
from ragexp.tracking import store
from ragexp.tracking.evalset_dataset import evalset_input
from ragexp.tracking.experiments import gold_level
from ragexp.tracking.metric_names import split_for_mlflow, to_mlflow
from ragexp.tracking.recall_plot import recall_curve_svg
from ragexp.tracking.run_names import run_params
from ragexp.tracking.trace_content import Passages
from ragexp.tracking.traces import log_run_traces, reranks

TAG_WARNINGS = "ragexp.warnings"  # what the run warned about (also in ragexp_results.json, meta.warnings)
TAG_LIMIT = 5000
TAG_JUDGE_WARNING = "ragexp.judge_warning"
#: The backend the embedding model actually encoded with (``meta.embedding_backend``): ``torch`` where
#: ``embedding.backend=onnx`` fell back because ONNX could not export the model.
TAG_EMBEDDING_BACKEND = "ragexp.embedding_backend"
#: The device every model of the run resolved to (``device: auto`` included): :func:`ragexp.models.device.devices_tag`.
TAG_DEVICES = "ragexp.devices"


def judge_fields(record: dict | None) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """Params, metrics and tags for a run's judge record (``meta["judge"]``,
    :func:`~ragexp.judging.calibration.record.judge_run_record`)::

        params  judge.effective_threshold, judge.threshold_source,
                judge.calibration.{set, file, sha256, n, estimate}
        metrics judge.calibration.cv_accuracy, judge.calibration.cv_kappa (in MLflow under
                generation/, :func:`~ragexp.tracking.metric_names.to_mlflow`)
        tags    ragexp.judge_warning (the plain sentence, when uncalibrated or kappa < 0.4),
                ragexp.judge_key (model + prompt + threshold: the reviews that speak for this judge)
    """
    if record is None:
        return {}, {}, {}
    params = {"judge.threshold_source": str(record["threshold_source"] or "none")}
    if record["threshold"] is not None:
        params["judge.effective_threshold"] = f"{record['threshold']:.6g}"
    metrics: dict[str, float] = {}
    calibration = record["calibration"]
    if calibration is None:
        params["judge.calibration.set"] = "none"
    else:
        params.update({f"judge.calibration.{key}": str(calibration[key]) for key in ("set", "file", "sha256", "n", "estimate")})
        metrics["judge.calibration.cv_accuracy"] = calibration["accuracy"]
        if calibration["kappa"] is not None:
            metrics["judge.calibration.cv_kappa"] = calibration["kappa"]
    tags = {TAG_JUDGE_WARNING: record["warning"]} if record["warning"] else {}
    tags[TAG_JUDGE_KEY] = judge_key(record)
    return params, metrics, tags


TOP_IDS = 3
#: A black-box system's per-query share of passages placed in the corpus (:mod:`ragexp.evaluation.system_step`).
LOCATED = "black_box.located_rate"
#: Generation columns of the per-query table, when the run has a generator (scalars and text).
GENERATION_COLUMNS = ("answer", "faithfulness", "answer_relevance", "f1", "exact_match", "key_fact_recall",
                      "generated_question")
#: The generation columns that are fields of the query's record; the others are its metrics.
TEXT_COLUMNS = ("answer", "generated_question")


def _outcome(row: QueryResult, ks: list[int]) -> str:
    """One readable cell per query, the evaluation view's default "compare" column:
    ``rank 2 · hit@5 · nDCG@5 0.63`` / ``miss (none relevant in the top 100)`` / ``miss (nothing
    retrieved)`` / ``no gold``; with a generator, `` · <failure class>`` appended."""
    if not row.has_gold():
        text = "no gold"
    elif not row.ranking:
        text = "miss (nothing retrieved)"
    elif row.first_relevant_rank is None:
        text = f"miss (none relevant in the top {len(row.ranking)})"
    else:
        k = 5 if 5 in ks else max(ks)
        hit = "hit" if row.metrics.get(at("hit_rate", k)) else "miss"
        text = f"rank {row.first_relevant_rank} · {hit}@{k} · nDCG@{k} {row.metrics.get(at('ndcg', k), 0.0):.2f}"
    if row.failure_class:
        text += f" · {row.failure_class}"
    return text


def per_query_table(output: RunOutput) -> dict[str, list]:
    """The per-query table, flat columns a user filters and compares across runs in MLflow's
    evaluation view: ``query_id`` (the default group-by), ``outcome`` (the default compare column,
    :func:`_outcome`), the query, tags, failure class (the generation run's, else the retrieval-only
    one: :meth:`~ragexp.evaluation.results.QueryResult.outcome_class`), rank of the first relevant unit (empty when none was retrieved),
    ``hit@k`` and ``ndcg@k`` per k, ``rr`` (reciprocal rank), the top-3 retrieved (with their page,
    ``(p. 3)``, in a PDF) and the gold ids, ``gold_pages`` (``"manual p. 3"`` per evidence span) when
    the corpus has paged documents, then generation columns when the run has a generator."""
    rows = output.results.per_query
    ks = sorted(output.results.meta["ks"])
    context_k = int(output.results.meta.get("context_k") or max(ks))
    table: dict[str, list] = {
        "query_id": [r.query_id for r in rows],
        "outcome": [_outcome(r, ks) for r in rows],
        "query": [r.query for r in rows],
        "tags": [", ".join(r.tags) for r in rows],
        "failure_class": [r.outcome_class(context_k) for r in rows],
        "first_relevant_rank": [r.first_relevant_rank for r in rows],
    }
    for k in ks:
        table[f"hit@{k}"] = [r.metrics.get(at("hit_rate", k)) for r in rows]
    table["rr"] = [r.metrics.get("mrr") for r in rows]
    for k in ks:
        table[f"ndcg@{k}"] = [r.metrics.get(at("ndcg", k)) for r in rows]
    table[f"top_{TOP_IDS}"] = [", ".join(_with_page(cid, r) for cid in r.top_ids(TOP_IDS)) for r in rows]
    table["gold_ids"] = [", ".join(sorted(cid for cid, grade in r.relevant.items() if is_relevant(grade))) for r in rows]
    if any(LOCATED in r.metrics for r in rows):  # a black-box system: how much of what it returned was placed
        table["located_rate"] = [r.metrics.get(LOCATED) for r in rows]
    if any(r.gold_pages is not None for r in rows):
        table["gold_pages"] = [", ".join(r.gold_pages or ()) for r in rows]
    for column in GENERATION_COLUMNS:
        cells = [getattr(r, column) if column in TEXT_COLUMNS else r.metrics.get(column) for r in rows]
        if any(cell is not None for cell in cells):
            table[column] = [_cell(cell) for cell in cells]
    return table


def _with_page(chunk_id: str, row: QueryResult) -> str:
    """``doc#chunk_4 (p. 3)`` when the chunk lies in a paged document (a PDF), else the id."""
    page = (row.pages or {}).get(chunk_id)
    return f"{chunk_id} ({page})" if page else chunk_id


def _cell(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def evalset_dataset(evalset: EvalSet):
    frame = pd.DataFrame(
        {
            "id": [i.id for i in evalset.items],
            "query": [i.query for i in evalset.items],
            "tags": [",".join(i.tags) for i in evalset.items],
            "evidence": [json.dumps([e.to_dict() for e in i.evidence]) for i in evalset.items],
            "gold_answer": [i.gold_answer or "" for i in evalset.items],
        }
    )
    with warnings.catch_warnings():  # a local path is both a file and an artifact source to MLflow; either is fine
        warnings.simplefilter("ignore", UserWarning)
        return mlflow.data.from_pandas(
            frame, source=evalset.source or "ragexp", name=evalset.name or "evalset", digest=evalset.fingerprint()[:16]
        )


LOCAL_CONFIG = "resolved.yaml"
LOCAL_OVERRIDES = "overrides.yaml"


def write_config(folder: Path, cfg: DictConfig, overrides: list[str]) -> None:
    """The resolved config and the Hydra overrides, as ``folder/resolved.yaml`` and ``folder/overrides.yaml``."""
    (folder / LOCAL_CONFIG).write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
    (folder / LOCAL_OVERRIDES).write_text(OmegaConf.to_yaml(OmegaConf.create(overrides)), encoding="utf-8")


def save_local(output_dir: Path, cfg: DictConfig, output: RunOutput, overrides: list[str]) -> None:
    """Everything :func:`log_evaluation` needs, written to ``output_dir`` before MLflow is touched,
    so ``ragexp upload output_dir`` can log the run later if the store is unreachable."""
    output_dir.mkdir(parents=True, exist_ok=True)
    write_config(output_dir, cfg, overrides)
    output.results.save(output_dir / ARTIFACT_NAME)
    write_artifacts(output_dir, output.artifacts)


def write_artifacts(folder: Path, artifacts: Mapping[str, str]) -> None:
    """A run's extra text artifacts (a black-box system's responses and placements) under ``folder``."""
    for name, text in artifacts.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def log_evaluation(
    client: MlflowClient,
    experiment_id: str,
    cfg: DictConfig,
    output: RunOutput,
    evalset: EvalSet,
    *,
    overrides: list[str],
    parent_run_id: str | None,
    tags: Mapping[str, str] | None = None,
    ended_at: float | None = None,
    saved: Path | None = None,
    passages: Passages | None = None,
    traces: bool = False,
) -> str:
    """Create the run, write everything, close it; returns the run id. ``tags`` are added to
    ragexp's own (axis tags, ``ragexp.reproduces`` on a reproduction ...). The run starts at
    ``meta["started_at"]`` (the job's start, when known) and ends when it is closed, or at
    ``ended_at`` (epoch seconds; ``ragexp upload`` passes when the results were computed), so
    MLflow's duration is the job's work, not the logging. ``saved``: the folder :func:`save_local`
    wrote this run to; its config files and per-query rows are copied, not serialized again.
    ``passages``: the run's chunk and document texts (the eval set's dataset records and the
    traces show them); ``traces``: log one trace per query (needs ``passages``)."""
    interrupt.check()  # a signal received (and perhaps lost) while computing: open no run
    with interrupt.deferred():  # a write cut short can leave the sqlite store locked and the run RUNNING
        run_id = _log_run(client, experiment_id, cfg, output, evalset, overrides=overrides, parent_run_id=parent_run_id,
                          extra_tags=tags or {}, ended_at=ended_at, saved=saved, passages=passages,
                          traces=traces and passages is not None)
    interrupt.check()  # a signal received while closing: the run is complete; the sweep stops here
    return run_id


def _millis(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def run_tags(cfg: DictConfig, output: RunOutput, evalset: EvalSet) -> dict[str, str]:
    """ragexp's own tags of a job run (see the module docstring)."""
    meta = output.results.meta
    devices = devices_tag(OmegaConf.to_container(cfg, resolve=True), PIPELINE_GROUPS)
    return {
        store.TAG_KIND: "job",
        store.RUN_TYPE_TAG: store.RUN_TYPE_EVALUATION,
        store.TAG_CONFIG_HASH: output.config_hash,
        store.TAG_COST_SETTINGS: settings_key(cfg.get("cost")),
        store.TAG_CORPUS_FP: meta["corpus_fingerprint"],
        store.TAG_EVALSET_FP: meta["evalset_fingerprint"],
        store.TAG_EVALSET_NAME: evalset.name,
        store.TAG_GOLD_LEVEL: gold_level(evalset),
        store.TAG_CODE_VERSION: store.code_version(),
        store.TAG_VERSION: meta["ragexp_version"],
        "ragexp.dataset": str(cfg.dataset.get("name", "")),
        **({TAG_EMBEDDING_BACKEND: meta["embedding_backend"]} if meta.get("embedding_backend") else {}),
        **({TAG_DEVICES: devices} if devices else {}),
        **({TAG_WARNINGS: " | ".join(meta["warnings"])[:TAG_LIMIT]} if meta.get("warnings") else {}),
        **store.package_versions(),
    }


def _log_run(
    client: MlflowClient,
    experiment_id: str,
    cfg: DictConfig,
    output: RunOutput,
    evalset: EvalSet,
    *,
    overrides: list[str],
    parent_run_id: str | None,
    extra_tags: Mapping[str, str],
    ended_at: float | None,
    saved: Path | None,
    passages: Passages | None,
    traces: bool,
) -> str:
    results = output.results
    tags = {**run_tags(cfg, output, evalset), **extra_tags}
    if parent_run_id:
        tags[store.PARENT_TAG] = parent_run_id
    judge_params, judge_metrics, judge_tags = judge_fields(results.meta.get("judge"))
    tags.update(judge_tags)
    metrics, constants = split_for_mlflow(results.aggregates, output.timings)
    metrics.update({to_mlflow(key): value for key, value in judge_metrics.items()})
    chunking_label = make_chunker(chunker_options(cfg.chunking)).describe()
    params = {**run_params(semantic_config(cfg), chunking_label), **constants, **judge_params}
    run = client.create_run(experiment_id, run_name=output.run_name, tags=tags,
                            start_time=_millis(results.meta.get("started_at")))
    run_id = run.info.run_id
    error: BaseException | None = None
    try:
        results.meta["run_id"] = run_id
        # Artifacts before the metrics: MLflow reads the run back to find its artifact location.
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "config").mkdir()
            if saved is None:
                write_config(tmp_path / "config", cfg, overrides)
            else:
                for name in (LOCAL_CONFIG, LOCAL_OVERRIDES):
                    shutil.copyfile(saved / name, tmp_path / "config" / name)
            results.save(tmp_path / ARTIFACT_NAME)
            write_artifacts(tmp_path, output.artifacts)
            (tmp_path / "plots").mkdir()
            (tmp_path / "plots" / "recall_at_k.svg").write_text(
                recall_curve_svg(results.aggregates, results.meta["ks"], output.run_name), encoding="utf-8")
            # the per-query table as MLflow's log_table writes it (pandas' split orientation), but
            # through the checked location: log_table would read the run's location from the store again
            pd.DataFrame(per_query_table(output)).to_json(tmp_path / store.PER_QUERY_TABLE, orient="split",
                                                          index=False, date_format="iso")
            store.run_artifacts(client, run_id).log_artifacts(str(tmp_path))
        client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps([{"path": store.PER_QUERY_TABLE, "type": "table"}]))
        store.log_batched(client, run_id, params=params, metrics=metrics)
        documents = passages.documents if passages is not None else {}
        dataset = (evalset_input(client, experiment_id, evalset, documents)
                   or _create_dataset_input(evalset_dataset(evalset), "eval", None))
        client.log_inputs(run_id, datasets=[dataset])
        if traces:
            log_run_traces(client, experiment_id, run_id, results, evalset, passages, reranked=reranks(cfg))
        interrupt.check()  # a signal received during the writes: KILLED, not FINISHED
    except BaseException as err:  # noqa: BLE001 - any failure must leave the run FAILED/KILLED, then propagate
        error = err
        raise
    finally:
        _close(client, run_id, error, _millis(ended_at))
    return run_id


def _close(client: MlflowClient, run_id: str, error: BaseException | None, end_time: int | None = None) -> None:
    """FINISHED after the last write; KILLED on interrupt; on any other error (including failing to
    close) FAILED and then deleted: the results are on disk, and the retry (or ``ragexp upload``)
    logs a complete run, so a half-written copy would only be debris (e.g. a sqlite lock under
    parallel workers). If the store is down the run stays FAILED or RUNNING, never FINISHED."""
    try:
        client.set_terminated(run_id, status=store.terminal_status(error), end_time=end_time)
    except Exception:
        _discard(client, run_id)
        raise
    if isinstance(error, Exception):
        _discard(client, run_id)


def _discard(client: MlflowClient, run_id: str) -> None:
    with contextlib.suppress(Exception):
        client.delete_run(run_id)
