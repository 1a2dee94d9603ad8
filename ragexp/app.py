"""``ragexp run``: the Hydra app. One job = one evaluated pipeline = one MLflow run.

A multirun (``-m``) sweeps the cross product of the overrides; :mod:`ragexp.tracking.sweep` makes it one
parent run with a child per job. With ``resume=true`` (default) a sweep job whose config hash
(semantic config + corpus and eval-set fingerprints) already has a FINISHED run is skipped.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ragexp import interrupt
from ragexp.config import register_schema, validate
from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError
from ragexp.tracking import store

log = logging.getLogger("ragexp")
CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"


def evaluate_and_log(cfg: DictConfig) -> dict | None:
    """Run one job: returns the run's aggregate metrics, or ``None`` when resumed (skipped)."""
    from ragexp.cache import StageCache
    from ragexp.evaluation.generation_step import generation_step
    from ragexp.evaluation.runner import build_pipeline, config_hash, execute, prepare_data
    from ragexp.summary import print_run_summary
    from ragexp.tracking.run_logger import log_evaluation, save_local
    from ragexp.tracking.sweep import current_parent_run

    interrupt.check()  # a SIGTERM whose raise was lost still stops the sweep before its next job
    validate(cfg)
    cache = StageCache(Path(cfg.cache_dir))
    pipeline = build_pipeline(cfg, cache)  # a bad parameter fails before the store or the cache is touched
    client = store.connect(cfg.tracking.uri, cfg.tracking.connect_timeout_s)
    experiment_id = store.ensure_experiment(client, cfg.tracking.experiment)
    data = prepare_data(cfg, cache, progress=cfg.progress)
    parent = current_parent_run()
    if parent and cfg.resume:
        existing = store.find_finished_run(client, experiment_id, config_hash(cfg, data))
        if existing:
            log.info("resume: skipping, run %s already FINISHED with this config hash", existing)
            return None
    output = execute(
        cfg, cache=cache, data=data, pipeline=pipeline, progress=cfg.progress, generation_step=generation_step
    )
    output_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else Path.cwd()
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    save_local(output_dir, cfg, output, overrides)  # first: the results survive a store outage
    run_id = log_with_retries(
        lambda: log_evaluation(client, experiment_id, cfg, output, data.evalset, overrides=overrides, parent_run_id=parent),
        output_dir,
    )
    print_run_summary(output, run_id, cfg.tracking.uri)
    return output.results.aggregates


LOG_ATTEMPTS = 3


def log_with_retries(log_once, output_dir: Path, attempts: int = LOG_ATTEMPTS, backoff_s: float = 2.0) -> str:
    """Log to MLflow, retrying with backoff; when the store stays unreachable, say where the
    results are kept and how to upload them later (``ragexp upload DIR``), and fail the job."""
    for attempt in range(1, attempts + 1):
        try:
            return log_once()
        except RagexpInputError:
            raise
        except Exception as err:  # the store went away mid-run: transport and store errors alike
            if attempt == attempts:
                raise TrackingUnavailable(
                    f"could not log to the tracking store after {attempts} attempts ({type(err).__name__}: "
                    f"{str(err).splitlines()[0][:200] if str(err) else ''}); results are kept in {output_dir}; "
                    f"upload them later with: ragexp upload {output_dir}"
                ) from err
            log.warning("logging failed (attempt %d/%d): %s; retrying", attempt, attempts, err)
            time.sleep(backoff_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


class TrackingUnavailable(RuntimeError):
    """The run was computed and saved locally, but MLflow could not be written."""


_started = False


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    global _started
    _started = True
    # progress=false silences every tqdm bar, including those of the pipelines and model libraries.
    if not cfg.progress:
        os.environ["TQDM_DISABLE"] = "1"
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its INFO lines report CPU features
    try:
        evaluate_and_log(cfg)
    except RagexpInputError as err:
        print(f"ragexp run: error: {err}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT_CODE) from None
    except TrackingUnavailable as err:
        print(f"ragexp run: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


SECRET_KEYS = {"api_key", "apikey", "api_token", "password"}


def _override_key(arg: str) -> str:
    """The key of a Hydra override ``[+|++|~]key=value`` (the whole argument when there is no ``=``)."""
    return arg.split("=", 1)[0].lstrip("+~") if "=" in arg else ""


def run_app(argv: list[str]) -> int:
    """Entry for ``ragexp run``; Hydra parses ``argv`` (overrides, ``-m``, ``--cfg`` ...)."""
    secret = next((arg for arg in argv if _override_key(arg).rsplit(".", 1)[-1] in SECRET_KEYS), None)
    if secret is not None:  # refuse before Hydra writes the override into .hydra/*.yaml
        print(f"ragexp run: error: field {_override_key(secret)!r}: never put an API key in a config or override; "
              "export it and name the variable with api_key_env", file=sys.stderr)
        return USAGE_EXIT_CODE
    register_schema()
    interrupt.install(signal.SIGTERM)
    sys.argv = ["ragexp run", *argv]
    try:
        _hydra_main()
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM via ragexp.interrupt
        from ragexp.tracking.sweep import close_open_parent, terminal_status

        signum = getattr(err, "signum", signal.SIGINT)
        parent = close_open_parent(terminal_status(err))  # KILLED
        closed = f"; sweep parent run {parent} closed KILLED" if parent else ""
        print(f"ragexp run: interrupted by signal {signum}{closed}; relaunch the same command to resume",
              file=sys.stderr)
        return 128 + int(signum)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        # Hydra reports config errors (unknown option, bad override, schema type) with exit 1
        # before the job starts: that is bad input, exit 2 like every other input error.
        return USAGE_EXIT_CODE if code == 1 and not _started else code
    return 0
