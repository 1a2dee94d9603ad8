"""An exclusive ``flock`` on a lock file, held for a block: how processes that start together
create one shared file once (a new sqlite store, the store schema template). The lock is released
when the file is closed, also when the process dies."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


def open_lock_file(path: Path) -> TextIO:
    """``path`` opened for locking, created (and its folder) if missing; raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a")  # noqa: SIM115 - closed by locked()


@contextlib.contextmanager
def locked(handle: TextIO) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the open lock file ``handle`` for the block, then close it."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # closing releases the lock
