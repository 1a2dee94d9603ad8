"""``ragexp upload DIR``: log a run that was computed while the tracking store was unreachable.

``DIR`` is the job's output folder, where every run saves ``resolved.yaml``, ``overrides.yaml``
and ``ragexp_results.json`` before touching MLflow. Nothing is recomputed; the eval set is
reloaded only to log it as the run's input, and must still have the saved fingerprint.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from omegaconf import OmegaConf

from ragexp.errors import RagexpInputError
from ragexp.tracking import experiments, store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", type=Path, metavar="DIR", help="a run's output folder (outputs/... or multirun/.../N)")
    parser.add_argument("--tracking-uri", default=None, help="default: the uri saved with the run")


def run(args: argparse.Namespace) -> int:
    from ragexp.config.schema import load_saved_config
    from ragexp.data.dataset import load_dataset
    from ragexp.evaluation.prepared import sample_evalset
    from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
    from ragexp.evaluation.runner import RunOutput
    from ragexp.jobs.job import log_run
    from ragexp.runtime.stage_cache import StageCache
    from ragexp.tracking.run_logger import LOCAL_CONFIG, LOCAL_OVERRIDES, log_evaluation

    folder = args.output_dir
    for name in (LOCAL_CONFIG, ARTIFACT_NAME):
        if not (folder / name).exists():
            raise RagexpInputError(f"no {name} here: not a ragexp run output folder", file=folder)
    cfg = load_saved_config(folder / LOCAL_CONFIG)
    overrides = list(OmegaConf.load(folder / LOCAL_OVERRIDES)) if (folder / LOCAL_OVERRIDES).exists() else []
    results = RunResults.load(folder / ARTIFACT_NAME)
    corpus, evalset = load_dataset(cfg.dataset, StageCache(cfg.cache_dir))  # converted documents read, not written
    if cfg.eval.get("sample") is not None:  # a sampled run was scored on the sample, which has its own fingerprint
        evalset = sample_evalset(evalset, cfg.eval.sample, cfg.eval.get("sample_seed", 0))
    if evalset.fingerprint() != results.meta.get("evalset_fingerprint"):
        raise RagexpInputError("the eval set changed since this run was computed; refusing to log it against the new one",
                               file=folder / ARTIFACT_NAME, field="meta.evalset_fingerprint")
    uri = args.tracking_uri or cfg.tracking.uri
    client = store.connect(uri, cfg.tracking.connect_timeout_s)
    experiment_id = experiments.ensure_for_evalset(client, cfg.tracking.experiment, evalset)
    experiments.describe_once(client, experiment_id, corpus, evalset)
    output = RunOutput(results, results.meta["run_name"], results.meta["config_hash"], results.meta.get("timings", {}))
    run_id = log_run(
        lambda: log_evaluation(client, experiment_id, cfg, output, evalset, overrides=overrides, parent_run_id=None,
                               tags={"ragexp.uploaded_from": str(folder.resolve())}, ended_at=results.meta.get("finished_at")),
        folder,
    )
    print(f"logged {results.meta['run_name']} as run {run_id} to {uri}")
    return 0
