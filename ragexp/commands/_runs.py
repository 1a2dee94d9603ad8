"""Shared by the commands that read logged runs: tracking URI option, run lookup, results download."""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ragexp.config.machine import default_tracking_uri
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.tracking import store


def add_tracking_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri", default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)",
    )


def client_for(args: argparse.Namespace) -> tuple[MlflowClient, str]:
    """A client on an existing store (a reading command never creates an empty one)."""
    uri = args.tracking_uri or default_tracking_uri()
    return store.connect(uri, create=False), uri


def get_run(client: MlflowClient, run_id: str):
    try:
        return client.get_run(run_id)
    except MlflowException:
        raise RagexpInputError(f"no run with id {run_id!r} in the tracking store {client.tracking_uri} (pass --tracking-uri "
                               "or set MLFLOW_TRACKING_URI to the store that holds it)", field="RUN_ID") from None


RUN_ID = re.compile(r"[0-9a-f]{32}")


def load_results(ref: str, tracking_uri: str | None = None) -> RunResults:
    """A results file path, or an MLflow run id (32 hex digits) whose ``ragexp_results.json`` is downloaded."""
    path = Path(ref)
    if path.exists() or not RUN_ID.fullmatch(ref):
        return RunResults.load(path)
    uri = tracking_uri or default_tracking_uri()
    get_run(store.connect(uri, create=False), ref)
    with tempfile.TemporaryDirectory(prefix="ragexp-") as scratch:
        return RunResults.load(store.download_artifact(ref, ARTIFACT_NAME, uri, dst_dir=Path(scratch)))
