"""``ragexp upload DIR``: log a run that was computed while the tracking store was unreachable.

``DIR`` is the job's output folder, where every run saves ``resolved.yaml``, ``overrides.yaml``
and ``ragexp_results.json`` before touching MLflow. Nothing is recomputed; the eval set is
reloaded only to log it as the run's input, and must still have the saved fingerprint. The folder
goes through the job function like every run (:func:`ragexp.jobs.job.run_job`): its config and
overrides are screened for secrets and checked before anything is logged.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from omegaconf import OmegaConf

from ragexp.errors import RagexpInputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", type=Path, metavar="DIR", help="a run's output folder (outputs/... or multirun/.../N)")
    parser.add_argument("--tracking-uri", default=None, help="default: the uri saved with the run")


def run(args: argparse.Namespace) -> int:
    from ragexp.config.schema import load_saved_config
    from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
    from ragexp.jobs.job import run_job
    from ragexp.tracking.run_logger import LOCAL_CONFIG, LOCAL_OVERRIDES

    folder = args.output_dir
    for name in (LOCAL_CONFIG, ARTIFACT_NAME):
        if not (folder / name).exists():
            raise RagexpInputError(f"no {name} here: not a ragexp run output folder", file=folder)
    cfg = load_saved_config(folder / LOCAL_CONFIG)
    overrides = [str(o) for o in OmegaConf.load(folder / LOCAL_OVERRIDES)] if (folder / LOCAL_OVERRIDES).exists() else []
    results = RunResults.load(folder / ARTIFACT_NAME)
    if args.tracking_uri:
        cfg.tracking.uri = args.tracking_uri
    result = run_job(cfg, output_dir=folder, overrides=overrides, saved_results=results,
                     tags={"ragexp.uploaded_from": str(folder.resolve())})
    print(f"logged {results.meta['run_name']} as run {result.run_id} to {cfg.tracking.uri}")
    return 0
