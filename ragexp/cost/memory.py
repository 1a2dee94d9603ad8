"""Peak resident memory (RSS) of one run, not of the process it shares with a sweep's other jobs.

Linux keeps the peak as ``VmHWM`` in ``/proc/self/status``; writing ``5`` to
``/proc/self/clear_refs`` resets it to the current RSS. :func:`reset_peak` does that when a run
starts and :func:`peak_rss_bytes` reads it when it ends, so a sweep's third job reports its own
peak, not the largest of the three. Where the reset is not possible (another OS, a hardened
kernel) the peak is the process's since it started (``getrusage``), and :func:`reset_peak` says so.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
_reset = {"done": False}


def reset_peak() -> bool:
    """Start counting the peak afresh; ``False`` when this system cannot (module docstring)."""
    try:
        CLEAR_REFS.write_text("5")
        _reset["done"] = True
    except OSError:
        _reset["done"] = False
    return _reset["done"]


def peak_since() -> str:
    """``"job"`` when the peak was reset at the job's start, else ``"process"``."""
    return "job" if _reset["done"] else "process"


def peak_rss_bytes() -> int:
    """The peak RSS since :func:`reset_peak` (else since the process started), in bytes."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
