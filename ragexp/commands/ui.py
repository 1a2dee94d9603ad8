"""``ragexp ui``: the MLflow UI on the configured store, bound to loopback unless told otherwise."""

from __future__ import annotations

import argparse
import os
import sys

from ragexp.tracking import store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-uri", default=None, help="store to show (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=5000)


def run(args: argparse.Namespace) -> int:
    uri = args.tracking_uri or store.default_tracking_uri()
    store.connect(uri, create=False)  # fail fast, and never show (so create) an empty store
    print(f"MLflow UI for {uri} at http://{args.host}:{args.port}  (Ctrl+C to stop)", flush=True)
    # One worker: several workers on a 2-core machine kept dying and never became healthy.
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", args.host, "--port", str(args.port),
               "--workers", "1"]
    os.execv(sys.executable, command)
    return 0
