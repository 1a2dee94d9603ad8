"""SIGTERM as an interrupt that is neither lost nor lands in the middle of a store write.

``ragexp run`` turns SIGTERM into :class:`Interrupted` (a ``KeyboardInterrupt``), so the job's
open run is closed KILLED. Raising from a signal handler has two hazards, both seen in tests:

- the exception can fire inside a weakref callback or a finaliser, where Python prints
  "Exception ignored" and drops it: the sweep would carry on and close its runs FINISHED;
- it can fire inside SQLAlchemy's flush or commit on the sqlite store, leaving a connection
  holding the write lock: the run can then be neither closed nor deleted and stays RUNNING.

So the handler records the signal, and raises only outside :func:`deferred` blocks (the store
writes of one run); :func:`check` raises for a recorded signal at safe points: before a run is
opened, before it is closed FINISHED, and before each job starts.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

_received: int | None = None
_deferring = 0


class Interrupted(KeyboardInterrupt):
    """A termination signal, raised in the main thread so open runs are closed KILLED."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _handler(signum: int, frame) -> None:  # noqa: ARG001 - signal handler signature
    global _received
    _received = signum
    if not _deferring:
        raise Interrupted(signum)


def install(*signums: int) -> None:
    """Handle ``signums`` (default: SIGTERM) as interrupts; call from the main thread."""
    for signum in signums or (signal.SIGTERM,):
        signal.signal(signum, _handler)


def check() -> None:
    """Raise :class:`Interrupted` if a signal was received (even one whose raise was lost)."""
    if _received is not None:
        raise Interrupted(_received)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Inside the block a signal is only recorded; call :func:`check` to act on it."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
