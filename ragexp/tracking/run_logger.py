"""What one evaluated run writes to MLflow.

params: the flattened resolved config; metrics: every aggregate (overall, ``doc_``, per tag,
95% CIs, stage timings as ``time.*``); tags: config hash, corpus and eval-set fingerprints,
code version, package versions; with a judge, its calibration next to faithfulness
(:func:`judge_fields`); artifacts: resolved config and Hydra overrides, the portable
``ragexp_results.json``, the per-query table (``log_table``), a recall@k curve; the eval set via
``log_input`` with its fingerprint as digest. The run is opened only after everything was
computed and is closed FINISHED only after the last write succeeded; a termination signal
received during the writes is held until they are done, then closes the run KILLED
(:mod:`ragexp.interrupt`).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient
from mlflow.tracking.fluent import _create_dataset_input
from omegaconf import DictConfig, OmegaConf

from ragexp import interrupt
from ragexp.data import EvalSet
from ragexp.evaluation.results import ARTIFACT_NAME
from ragexp.evaluation.runner import RunOutput, semantic_config
from ragexp.tracking import store
from ragexp.tracking.sweep import terminal_status

TABLE_DEPTH = 10
TAG_WARNINGS = "ragexp.warnings"  # what the run warned about (also in ragexp_results.json, meta.warnings)
TAG_LIMIT = 5000
TAG_JUDGE_WARNING = "ragexp.judge_warning"


def judge_fields(record: dict | None) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """Params, metrics and tags for a run's judge record (``meta["judge"]``,
    :func:`~ragexp.judging.judge_calibration.judge_run_record`)::

        params  judge.effective_threshold, judge.threshold_source,
                judge.calibration.{set, file, sha256, n, estimate}
        metrics judge.calibration.cv_accuracy, judge.calibration.cv_kappa
        tags    ragexp.judge_warning (the plain sentence, when uncalibrated or kappa < 0.4)
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
    return params, metrics, tags


def per_query_table(output: RunOutput) -> dict[str, list]:
    """Columns of the per-query table: ids, query, tags, top ranked ids with scores, relevant ids,
    first relevant rank, per-k hit/recall/precision, and generation columns when present."""
    rows = output.results.per_query
    ks = output.results.meta["ks"]
    table: dict[str, list] = {
        "query_id": [r["query_id"] for r in rows],
        "query": [r["query"] for r in rows],
        "tags": [",".join(r["tags"]) for r in rows],
        "retrieved": [json.dumps([[cid, round(s, 6)] for cid, s in r["ranking"][:TABLE_DEPTH]]) for r in rows],
        "relevant_ids": [json.dumps(sorted(cid for cid, g in r["relevant"].items() if g > 0)) for r in rows],
        "first_relevant_rank": [r["first_relevant_rank"] if r["first_relevant_rank"] is not None else -1 for r in rows],
    }
    for k in ks:
        for name in (f"hit_rate_at_{k}", f"recall_at_{k}", f"context_precision_at_{k}"):
            table[name] = [r["metrics"].get(name) for r in rows]
    table["mrr"] = [r["metrics"].get("mrr") for r in rows]
    for column in ("answer", "failure_class", "faithfulness", "answer_relevance", "exact_match", "f1",
                   "key_fact_recall", "generated_question", "claims"):
        if any(column in r or column in r["metrics"] for r in rows):
            table[column] = [_cell(r.get(column, r["metrics"].get(column))) for r in rows]
    return table


def _cell(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def recall_curve_png(output: RunOutput, path: Path) -> Path:
    """Hit rate@k and recall@k against k, chunk- and document-level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = output.results.aggregates
    ks = output.results.meta["ks"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name in ("hit_rate", "recall", "doc_recall"):
        values = [agg.get(f"{name}_at_{k}") for k in ks]
        if all(v is not None for v in values):
            ax.plot(ks, values, marker="o", label=name)
    ax.set_xlabel("k")
    ax.set_ylim(0, 1.02)
    ax.set_title(output.run_name, fontsize=7)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def save_local(output_dir: Path, cfg: DictConfig, output: RunOutput, overrides: list[str]) -> Path:
    """Everything :func:`log_evaluation` needs, written to ``output_dir`` before MLflow is touched,
    so ``ragexp upload output_dir`` can log the run later if the store is unreachable."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / LOCAL_CONFIG).write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
    (output_dir / LOCAL_OVERRIDES).write_text(OmegaConf.to_yaml(OmegaConf.create(overrides)), encoding="utf-8")
    return output.results.save(output_dir / ARTIFACT_NAME)


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
) -> str:
    """Create the run, write everything, close it; returns the run id. ``tags`` are added to
    ragexp's own (e.g. ``ragexp.reproduces`` on a reproduction)."""
    interrupt.check()  # a signal received (and perhaps lost) while computing: open no run
    with interrupt.deferred():  # a write cut short can leave the sqlite store locked and the run RUNNING
        run_id = _log_run(client, experiment_id, cfg, output, evalset, overrides=overrides, parent_run_id=parent_run_id,
                          extra_tags=tags or {})
    interrupt.check()  # a signal received while closing: the run is complete; the sweep stops here
    return run_id


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
) -> str:
    results = output.results
    tags = {
        store.TAG_KIND: "job",
        store.TAG_CONFIG_HASH: output.config_hash,
        store.TAG_CORPUS_FP: results.meta["corpus_fingerprint"],
        store.TAG_EVALSET_FP: results.meta["evalset_fingerprint"],
        store.TAG_CODE_VERSION: store.code_version(),
        store.TAG_VERSION: results.meta["ragexp_version"],
        "ragexp.dataset": str(cfg.dataset.get("name", "")),
        **({TAG_WARNINGS: " | ".join(results.meta["warnings"])[:TAG_LIMIT]} if results.meta.get("warnings") else {}),
        **store.package_versions(),
        **extra_tags,
    }
    if parent_run_id:
        tags[store.PARENT_TAG] = parent_run_id
    judge_params, judge_metrics, judge_tags = judge_fields(results.meta.get("judge"))
    tags.update(judge_tags)
    run = client.create_run(experiment_id, run_name=output.run_name, tags=tags)
    run_id = run.info.run_id
    error: BaseException | None = None
    try:
        results.meta["run_id"] = run_id
        metrics = {**results.aggregates, **judge_metrics, **{f"time.{k}": v for k, v in output.timings.items()}}
        params = {**store.flatten(semantic_config(cfg)), **judge_params}
        store.log_batched(client, run_id, params=params, metrics=metrics)
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            (tmp_path / "config").mkdir()
            (tmp_path / "config" / "resolved.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
            (tmp_path / "config" / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(overrides)), encoding="utf-8")
            results.save(tmp_path / ARTIFACT_NAME)
            (tmp_path / "plots").mkdir()
            recall_curve_png(output, tmp_path / "plots" / "recall_at_k.png")
            client.log_artifacts(run_id, str(tmp_path))
        mlflow.log_table(per_query_table(output), artifact_file=store.PER_QUERY_TABLE, run_id=run_id)
        client.log_inputs(run_id, datasets=[_create_dataset_input(evalset_dataset(evalset), "eval", None)])
        interrupt.check()  # a signal received during the writes: KILLED, not FINISHED
    except BaseException as err:  # noqa: BLE001 - any failure must leave the run FAILED/KILLED, then propagate
        error = err
        raise
    finally:
        _close(client, run_id, error)
    return run_id


def _close(client: MlflowClient, run_id: str, error: BaseException | None) -> None:
    """FINISHED after the last write; KILLED on interrupt; on any other error (including failing to
    close) FAILED and then deleted: the results are on disk, and the retry (or ``ragexp upload``)
    logs a complete run, so a half-written copy would only be debris (e.g. a sqlite lock under
    parallel workers). If the store is down the run stays FAILED or RUNNING, never FINISHED."""
    try:
        client.set_terminated(run_id, status=terminal_status(error))
    except Exception:
        _discard(client, run_id)
        raise
    if isinstance(error, Exception):
        _discard(client, run_id)


def _discard(client: MlflowClient, run_id: str) -> None:
    with contextlib.suppress(Exception):
        client.delete_run(run_id)
