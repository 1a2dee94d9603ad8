"""CPU threads for local models: sized to the cores this job owns, set deliberately, logged.

torch starts one intra-op thread per core of the machine. When several sweep jobs share the
machine, or other processes load it, those threads fight for cores and a 2-thread matrix
product can run several times slower than a 1-thread one. So ragexp decides::

    owned cores   = len(os.sched_getaffinity(0))          (the CPUs this process may run on)
    parallel jobs = $RAGEXP_PARALLEL_JOBS, else the Hydra joblib launcher's hydra.launcher.n_jobs
                    (-1 = all cores, -2 = all but one, as joblib counts), else 1
    auto threads  = max(1, owned cores // parallel jobs)

A local LLM's ``auto`` also leaves the cores to other processes that they keep busy now
(:func:`load_aware_threads`): a torch thread waiting at the end of each small parallel region for
a sibling that is off-core made a 2-thread run slower than a 1-thread one on a shared machine
(docs/generation.md, "Speed of local models")::

    busy elsewhere = CPU time the owned cores spent outside this process during a
                     LOAD_WINDOW_S sleep of this process (/proc/stat minus os.times), in cores
    load-aware     = max(1, min(auto threads, owned cores - round(busy elsewhere)))

:func:`configure_threads` applies ``threads`` (an int, or ``"auto"`` for the rule above) with
``torch.set_num_threads``, and sets torch's inter-op pool to 1 thread the first time (torch
accepts that only before any inter-op work has started; a later attempt is logged and skipped).
The value in force is returned, logged, and reported with the run (``gen.threads``, read back
with :func:`configured_threads`, which does not import torch).
"""

from __future__ import annotations

import logging
import os
import time

from ragexp.errors import RagexpInputError

log = logging.getLogger(__name__)

PARALLEL_JOBS_ENV = "RAGEXP_PARALLEL_JOBS"
LOAD_WINDOW_S = 0.5
"""How long :func:`cores_busy_elsewhere` watches the owned cores."""
RECHECK_S = 30.0
"""A load-aware ``auto`` is measured again at most this often (:func:`recheck_threads`)."""
_interop_set = False
_configured: int | None = None
_load_aware: tuple[float, int] | None = None  # (monotonic time measured, threads decided)


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


def _owned_cpu_jiffies() -> tuple[int, int] | None:
    """(busy, all) clock ticks of the owned CPUs since boot from ``/proc/stat``; ``None`` off Linux."""
    owned = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    busy = total = 0
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                name, *ticks = line.split()
                if name in owned:
                    values = [int(tick) for tick in ticks[:8]]  # user nice system idle iowait irq softirq steal
                    busy += sum(values) - values[3] - values[4]
                    total += sum(values)
    except (OSError, AttributeError, ValueError):
        return None
    return (busy, total) if total else None


def cores_busy_elsewhere(window_s: float = LOAD_WINDOW_S) -> float:
    """Cores of this process's CPUs that other processes kept busy during a ``window_s`` sleep:
    (busy ticks of the owned CPUs - this process's CPU ticks) / all ticks * owned cores. 0.0 where
    ``/proc/stat`` cannot be read."""
    start, own_start = _owned_cpu_jiffies(), os.times()
    time.sleep(window_s)
    end, own_end = _owned_cpu_jiffies(), os.times()
    if start is None or end is None or end[1] <= start[1]:
        return 0.0
    hz = os.sysconf("SC_CLK_TCK")
    own = (own_end.user + own_end.system - own_start.user - own_start.system) * hz
    busy = max(0.0, end[0] - start[0] - own)
    return min(owned_cores(), busy / (end[1] - start[1]) * owned_cores())


def load_aware_threads() -> int:
    """``auto`` for a local LLM: :func:`auto_threads`, less the cores busy elsewhere now, at least 1."""
    busy = cores_busy_elsewhere()
    count = max(1, min(auto_threads(), owned_cores() - round(busy)))
    log.info("cores busy in other processes: %.1f of %d; auto threads %d", busy, owned_cores(), count)
    return count


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


def recheck_threads(threads: int | str) -> int:
    """Before a batch of local-model work: :func:`configure_threads` with ``load_aware``, the
    load measured again when the last measurement is :data:`RECHECK_S` old (an int is set as is)."""
    if threads == "auto" and _load_aware is not None and time.monotonic() - _load_aware[0] < RECHECK_S:
        return configure_threads(_load_aware[1])
    return configure_threads(threads, load_aware=True)


def configure_threads(threads: int | str = "auto", *, load_aware: bool = False) -> int:
    """Set torch's intra-op threads (and, once, 1 inter-op thread); return the count in force.
    ``load_aware``: ``auto`` is :func:`load_aware_threads`, not :func:`auto_threads`."""
    global _interop_set, _configured, _load_aware
    import torch

    if threads == "auto" and load_aware:
        count = load_aware_threads()
        _load_aware = (time.monotonic(), count)
    else:
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
