"""MLflow: connecting to the store, naming experiments, and logging one evaluated run.

Everything a run logs is computed before the run is opened, then written in one block, so a
crash leaves a FAILED run (or none), never a half-logged FINISHED one. Tags written on every
run (``ragexp.*``) are what ``reproduce``, ``compare``, resumable sweeps and the gate read.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ragexp import __version__
from ragexp.errors import RagexpInputError

TAG_CONFIG_HASH = "ragexp.config_hash"
TAG_CORPUS_FP = "ragexp.corpus_fingerprint"
TAG_EVALSET_FP = "ragexp.evalset_fingerprint"
TAG_CODE_VERSION = "ragexp.code_version"
TAG_VERSION = "ragexp.version"
TAG_KIND = "ragexp.kind"
TAG_REPRODUCES = "ragexp.reproduces"
PARENT_TAG = "mlflow.parentRunId"
CONFIG_ARTIFACT = "config/resolved.yaml"
OVERRIDES_ARTIFACT = "config/overrides.yaml"
PER_QUERY_TABLE = "per_query.json"
PARAM_VALUE_LIMIT = 6000
BATCH = 100
TRACKED_PACKAGES = (
    "mlflow", "torch", "sentence-transformers", "transformers", "faiss-cpu", "rank-bm25", "numpy", "hydra-core",
)


@contextlib.contextmanager
def _http_limits(timeout_s: float) -> Iterator[None]:
    """Bound MLflow's HTTP client for one probe: one attempt, ``timeout_s`` seconds."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")}
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, int(timeout_s)))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def connect(uri: str, timeout_s: float = 10.0) -> MlflowClient:
    """Point MLflow at ``uri`` and prove the store answers, or fail fast naming the URI.

    A new sqlite store is created (schema migrated) here, once, before any sweep job starts:
    two workers migrating a fresh sqlite file at once lose runs.
    """
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    try:
        with _http_limits(timeout_s):
            client.search_experiments(max_results=1)
    except Exception as err:  # any transport or store error means "unreachable"
        reason = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
        raise RagexpInputError(f"cannot reach the MLflow tracking store at {uri}: {reason}", field="tracking.uri") from None
    return client


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """The id of experiment ``name``, created if missing (safe when workers race)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": "1", "c": "[1, 2]"}`` (lists stay one value)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        else:
            text = str(value)
            out[path] = text if len(text) <= PARAM_VALUE_LIMIT else text[: PARAM_VALUE_LIMIT - 3] + "..."
    return out


def code_version() -> str:
    """The git commit of the ragexp checkout (``+dirty`` when it has local changes), else the version."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"ragexp-{__version__}"
    return f"{commit}+dirty" if dirty else commit


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[f"ragexp.pkg.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def find_finished_run(client: MlflowClient, experiment_id: str, config_hash: str) -> str | None:
    """The id of a FINISHED run with this config hash (config + data fingerprints), if any."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{TAG_CONFIG_HASH}` = '{config_hash}' and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def log_batched(client: MlflowClient, run_id: str, *, params: Mapping[str, str] = {}, metrics: Mapping[str, float] = {},
                tags: Mapping[str, str] = {}) -> None:
    """Write params, metrics and tags in batches of at most 100 entities (MLflow's limit)."""
    import time

    now = int(time.time() * 1000)
    entities: list[Any] = [Param(k, v) for k, v in params.items()]
    entities += [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    entities += [RunTag(k, str(v)) for k, v in tags.items()]
    for start in range(0, len(entities), BATCH):
        chunk = entities[start : start + BATCH]
        client.log_batch(
            run_id,
            metrics=[e for e in chunk if isinstance(e, Metric)],
            params=[e for e in chunk if isinstance(e, Param)],
            tags=[e for e in chunk if isinstance(e, RunTag)],
        )


def log_artifact_text(client: MlflowClient, run_id: str, artifact_path: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / Path(artifact_path).name
        target.write_text(text, encoding="utf-8")
        parent = str(Path(artifact_path).parent)
        client.log_artifact(run_id, str(target), artifact_path=None if parent == "." else parent)


def download_artifact(run_id: str, artifact_path: str, tracking_uri: str | None = None) -> Path:
    """Fetch one artifact of a run to a temporary folder; a clear error when the run or file is missing."""
    try:
        local = mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path=artifact_path, dst_path=tempfile.mkdtemp(prefix="ragexp-"), tracking_uri=tracking_uri
        )
    except MlflowException as err:
        raise RagexpInputError(f"run {run_id!r} has no artifact {artifact_path!r} ({str(err).splitlines()[0][:200]})") from None
    return Path(local)


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
