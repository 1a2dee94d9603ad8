"""``ragexp upload DIR``: log a run that was computed while the tracking store was unreachable.

``DIR`` is the job's output folder, where every run saves ``resolved.yaml``, ``overrides.yaml``
and ``ragexp_results.json`` before touching MLflow. Nothing is recomputed; the eval set is
reloaded only to log it as the run's input, and must still have the saved fingerprint. The folder
is untrusted data (it may come from elsewhere): its config and overrides are read through the one
gate (:mod:`ragexp.config.run_config`) before anything is logged, and the run goes to this
machine's store (``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``),
never to the URI saved in the folder, which would receive this machine's MLflow credentials.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragexp.errors import RagexpInputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", type=Path, metavar="DIR", help="a run's output folder (outputs/... or multirun/.../N)")
    parser.add_argument("--tracking-uri", default=None,
                        help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db (never the uri saved in the folder)")


def run(args: argparse.Namespace) -> int:
    from ragexp.config.machine import default_tracking_uri, local_cache_dir
    from ragexp.config.run_config import read_overrides
    from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
    from ragexp.evaluation.job_spec import ConfigSource
    from ragexp.evaluation.saved_config import read_run_config
    from ragexp.jobs.job import log_saved_run
    from ragexp.tracking.run_logger import LOCAL_CONFIG, LOCAL_OVERRIDES

    folder = args.output_dir
    for name in (LOCAL_CONFIG, ARTIFACT_NAME):
        if not (folder / name).exists():
            raise RagexpInputError(f"no {name} here: not a ragexp run output folder", file=folder)
    overrides = read_overrides(folder / LOCAL_OVERRIDES) if (folder / LOCAL_OVERRIDES).exists() else []
    spec = read_run_config(folder / LOCAL_CONFIG, tracking_uri=args.tracking_uri or default_tracking_uri(),
                           cache_dir=local_cache_dir(), source=ConfigSource.uploaded, overrides=overrides)
    results = RunResults.load(folder / ARTIFACT_NAME)
    result = log_saved_run(spec, results, folder, tags={"ragexp.uploaded_from": str(folder.resolve())})
    print(f"logged {results.meta['run_name']} as run {result.run_id} to {spec.config.tracking.uri}")
    return 0
