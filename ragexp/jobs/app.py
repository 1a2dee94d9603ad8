"""``ragexp run``: the Hydra app. One job = one evaluated pipeline = one MLflow run.

A multirun (``-m``) sweeps the cross product of the overrides; :mod:`ragexp.tracking.sweep` makes it one
parent run with a child per job. With ``resume=true`` (default) a sweep job whose config hash
(semantic config + corpus and eval-set fingerprints) already has a FINISHED run is skipped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ragexp.config.command_line import RunCommandLine, parse_run_command_line
from ragexp.config.compose import CONFIG_DIR
from ragexp.config.endpoints import ALLOWED_ENDPOINTS_ENV
from ragexp.config.hydra_errors import CONFIG_ERRORS, config_error_line
from ragexp.config.schema import register_schema
from ragexp.config.secrets import screen_overrides
from ragexp.config.untrusted import gated_primary_config, local_hydra_overrides, screen_config_dirs
from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError, SweepRefused, TrackingUnavailable
from ragexp.runtime import interrupt, terminal

log = logging.getLogger("ragexp")


def register_resolvers() -> None:
    """``${ragexp.pid:}``: the launching process's id, in the run and sweep folder names (cached
    with the config like ``${now:...}``, so a sweep's workers see the launcher's)."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("ragexp.pid", os.getpid, use_cache=True, replace=True)


register_resolvers()  # at import: sweep workers resolve the folder names too


def run_one_job(cfg: DictConfig) -> None:
    """The Hydra task: one job of ``ragexp run`` (see :mod:`ragexp.jobs.job`), its config made a
    spec by the one gate (:func:`~ragexp.evaluation.job_spec.job_spec`); endpoints typed on the
    command line are checked too: a key variable is sent only where the machine's ``conf/`` or
    allow-list says (:mod:`ragexp.config.endpoints`)."""
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.jobs.console import print_run_summary
    from ragexp.jobs.job import LogTo, run_job
    from ragexp.tracking.sweep import current_parent_run, current_sweep_axes

    output_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else Path.cwd()
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    spec = job_spec(cfg, overrides, source=config_source())
    parent = current_parent_run()
    log_to = LogTo(parent_run_id=parent, axes=current_sweep_axes(), resume=bool(parent and cfg.resume))
    result = run_job(spec, output_dir=output_dir, log_to=log_to)
    if not result.skipped:
        print_run_summary(result.output, result.run_id, cfg.tracking.uri)


def config_source():
    """``config_path`` when Hydra's primary config folder is not this machine's ``conf/`` (a saved
    config handed with ``--config-path``, read through :func:`gated_primary_config`), else ``composed``."""
    from ragexp.evaluation.job_spec import ConfigSource

    if not HydraConfig.initialized():
        return ConfigSource.composed
    main = [source.path for source in HydraConfig.get().runtime.config_sources if source.provider == "main"]
    return ConfigSource.composed if main == [str(CONFIG_DIR)] else ConfigSource.config_path


_started = False


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    global _started
    _started = True
    try:
        run_one_job(cfg)
    except RagexpInputError as err:
        interrupt.check()  # an error a termination signal caused is the interrupt, not bad input
        if HydraConfig.initialized():
            discard_output_dir(Path(HydraConfig.get().runtime.output_dir))
        print(f"ragexp run: error: {terminal.escaped(str(err))}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT_CODE) from None
    except TrackingUnavailable as err:
        interrupt.check()
        print(f"ragexp run: error: {terminal.escaped(str(err))}", file=sys.stderr)
        raise SystemExit(1) from None


HYDRA_FILES = (".hydra",)


def discard_output_dir(output_dir: Path) -> None:
    """A job refused for bad input leaves no output folder: remove ``output_dir`` when it holds
    nothing but Hydra's bookkeeping (``.hydra/``, the job's ``*.log``), then its parents while they
    are empty, up to the working directory (``outputs/DATE/TIME`` goes, ``outputs/`` if empty)."""
    if not output_dir.is_dir() or any(p.name not in HYDRA_FILES and p.suffix != ".log" for p in output_dir.iterdir()):
        return
    shutil.rmtree(output_dir, ignore_errors=True)
    cwd = Path.cwd().resolve()
    parent = output_dir.resolve().parent
    while parent != cwd and cwd in parent.parents and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _fail_open_parent() -> None:
    """A sweep stopped by bad input closes its parent run FAILED, never leaves it RUNNING."""
    from ragexp.tracking.sweep import close_open_parent

    close_open_parent("FAILED")


def _run_hydra() -> None:
    """Run the Hydra app; any error it ends with after a termination signal is reported as that
    signal's interrupt. A raise from the signal handler can surface as another error: sqlite turns
    an exception raised in its Python callbacks (the store's ``regexp`` function) into
    ``OperationalError``, which a store check reports as bad input."""
    try:
        _hydra_main()
    except BaseException:
        interrupt.check()
        raise


def run_app(argv: list[str]) -> int:
    """Entry for ``ragexp run``: ``argv`` is parsed by ragexp's own grammar
    (:mod:`ragexp.config.command_line`) and Hydra gets only the canonical argv built from it.

    Before Hydra composes or writes anything: secrets in the raw arguments (``${oc.env:...}``
    expanded) and in the ``--config-dir`` files are refused, the command line is parsed (an
    unknown flag, a prefix of one, a ``--config-name`` that is not a plain name: one line), and a
    hand-given primary config (``--config-path``, a saved ``resolved.yaml``) is read as data
    through the gate and handed to Hydra as a gated copy (:mod:`ragexp.config.untrusted`), with
    this machine's run/sweep folders and sweep callback
    (:func:`ragexp.config.untrusted.local_hydra_overrides`); ``--allow-endpoint URL[=VARIABLE]``
    extends the endpoint allow-list of a hand-given config (:mod:`ragexp.config.endpoints`). Hydra
    re-raises its config errors here (``HYDRA_FULL_ERROR``), which prints each as one line with
    exit code 2 (:mod:`ragexp.config.hydra_errors`), like every other input error.
    """
    # faiss's INFO lines report CPU features; they would print (through Hydra's logging) before a
    # sweep's own refusal, from the launching process that checks every job's config
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    register_schema()
    interrupt.install(signal.SIGTERM)
    with contextlib.ExitStack() as stack:
        try:
            screen_overrides(argv)
            command = parse_run_command_line(argv)
            screen_config_dirs(command)
            command = stack.enter_context(gated_primary_config(command))  # removed on leaving, also on an interrupt
        except RagexpInputError as err:
            print(f"ragexp run: error: {terminal.escaped(str(err))}", file=sys.stderr)
            return USAGE_EXIT_CODE
        if command.allowed_endpoints:  # passed on as the allow-list variable: the sweep's workers inherit it
            os.environ[ALLOWED_ENDPOINTS_ENV] = ",".join(filter(None, [os.environ.get(ALLOWED_ENDPOINTS_ENV),
                                                                       *command.allowed_endpoints]))
        return _run_composed(command)


def _run_composed(command: RunCommandLine) -> int:
    """Hydra on ``command``'s canonical argv (checked by :func:`run_app`); the exit code."""
    sys.argv = ["ragexp run", *command.hydra_argv(), *local_hydra_overrides(command)]
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        _run_hydra()
    except SweepRefused as refused:  # the whole sweep's bad input: nothing was opened or written
        print(f"ragexp run: error: {terminal.escaped(str(refused.args[0]))}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM via ragexp.runtime.interrupt
        from ragexp.tracking.store import terminal_status
        from ragexp.tracking.sweep import close_open_parent

        signum = getattr(err, "signum", signal.SIGINT)
        parent = close_open_parent(terminal_status(err))  # KILLED
        closed = f"; sweep parent run {parent} closed KILLED" if parent else ""
        print(f"ragexp run: interrupted by signal {signum}{closed}; relaunch the same command to resume",
              file=sys.stderr)
        return 128 + int(signum)
    except RagexpInputError as err:  # raised outside a job: the sweep callback's store checks
        _fail_open_parent()
        print(f"ragexp run: error: {terminal.escaped(str(err))}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except CONFIG_ERRORS as err:  # also a sweep value the sweeper could not compose, after the parent opened
        _fail_open_parent()
        print(f"ragexp run: error: {config_error_line(err)}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if code != 0:  # a sweep stopped by a job's bad input
            _fail_open_parent()
        # Hydra reports config errors (unknown option, bad override, schema type) with exit 1
        # before the job starts: that is bad input, exit 2 like every other input error.
        return USAGE_EXIT_CODE if code == 1 and not _started else code
    return 0
