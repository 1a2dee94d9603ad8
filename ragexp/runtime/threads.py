"""CPU threads for local models: sized to the cores this job owns, set deliberately, logged.

torch starts one intra-op thread per core of the machine. When several sweep jobs share the
machine, or other processes load it, those threads fight for cores and a 2-thread matrix
product can run several times slower than a 1-thread one. So ragexp decides::

    owned cores   = len(os.sched_getaffinity(0))          (the CPUs this process may run on)
    parallel jobs = $RAGEXP_PARALLEL_JOBS, else the Hydra joblib launcher's hydra.launcher.n_jobs
                    (-1 = all cores, -2 = all but one, as joblib counts), else 1
    auto threads  = max(1, owned cores // parallel jobs)

:func:`configure_threads` applies ``threads`` (an int, or ``"auto"`` for the rule above) with
``torch.set_num_threads``, and sets torch's inter-op pool to 1 thread the first time (torch
accepts that only before any inter-op work has started; a later attempt is logged and skipped).
The value in force is returned, logged, and reported with the run (``gen.threads``, read back
with :func:`configured_threads`, which does not import torch).
"""

from __future__ import annotations

import logging
import os

from ragexp.errors import RagexpInputError

log = logging.getLogger(__name__)

PARALLEL_JOBS_ENV = "RAGEXP_PARALLEL_JOBS"
_interop_set = False
_configured: int | None = None


def owned_cores() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _launcher_n_jobs() -> int | None:
    """``hydra.launcher.n_jobs`` of the running Hydra job, when its launcher has one."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    launcher = HydraConfig.get().get("launcher")
    n_jobs = launcher.get("n_jobs") if launcher is not None else None
    return int(n_jobs) if n_jobs is not None else None


def parallel_jobs(cores: int) -> int:
    """How many jobs of this sweep run at once on these cores (see the module docstring)."""
    raw = os.environ.get(PARALLEL_JOBS_ENV)
    if raw is not None:
        try:
            jobs = int(raw)
        except ValueError:
            raise RagexpInputError(f"must be a positive integer, got {raw!r}", field=PARALLEL_JOBS_ENV) from None
        if jobs < 1:
            raise RagexpInputError(f"must be a positive integer, got {raw!r}", field=PARALLEL_JOBS_ENV)
        return jobs
    n_jobs = _launcher_n_jobs()
    if n_jobs is None or n_jobs == 0:
        return 1
    return n_jobs if n_jobs > 0 else max(1, cores + 1 + n_jobs)


def auto_threads() -> int:
    cores = owned_cores()
    return max(1, cores // parallel_jobs(cores))


def resolve_threads(threads: int | str) -> int:
    """``threads`` as a count: an int >= 1 as given, ``"auto"`` by the module's rule."""
    if threads == "auto":
        return auto_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise RagexpInputError(f"must be a positive integer or 'auto', got {threads!r}", field="threads")
    return threads


def configured_threads() -> int | None:
    """The intra-op thread count the last :func:`configure_threads` set in this process, or ``None``."""
    return _configured


def configure_threads(threads: int | str = "auto") -> int:
    """Set torch's intra-op threads (and, once, 1 inter-op thread); return the count in force."""
    global _interop_set, _configured
    import torch

    count = resolve_threads(threads)
    if not _interop_set:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError as err:  # inter-op work already ran in this process
            log.info("torch inter-op threads left at %d (%s)", torch.get_num_interop_threads(), err)
        _interop_set = True
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
        log.info("torch intra-op threads: %d (owned cores %d)", count, owned_cores())
    _configured = count
    return count
