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
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ragexp import interrupt
from ragexp.config import register_schema
from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError, TrackingUnavailable

log = logging.getLogger("ragexp")
CONFIG_DIR = Path(__file__).resolve().parents[1] / "conf"


def run_one_job(cfg: DictConfig) -> None:
    """The Hydra task: one job of ``ragexp run`` (see :mod:`ragexp.job`)."""
    from ragexp.job import run_job
    from ragexp.summary import print_run_summary
    from ragexp.tracking.sweep import current_parent_run

    output_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else Path.cwd()
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    parent = current_parent_run()
    result = run_job(cfg, output_dir=output_dir, overrides=overrides, parent_run_id=parent, resume=bool(parent and cfg.resume))
    if not result.skipped:
        print_run_summary(result.output, result.run_id, cfg.tracking.uri)


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
        run_one_job(cfg)
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
