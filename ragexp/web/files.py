"""Files a page edits: written whole or not at all, changed under one lock across processes.

- ``atomic_write(path, data)``: ragexp's one whole-or-nothing write
  (:mod:`ragexp.runtime.atomic_file`), the write a page's edit ends in.
- ``EditLock(path)``: held around every read-check-write of ``path`` (and the files that go with
  it): the requests of one server wait for each other, and other processes (a second server on
  the same file) wait on an exclusive ``flock`` of ``<path>.lock``
  (:mod:`ragexp.runtime.file_lock`; released when the holder dies, so a killed server never
  leaves it held). So a compare-and-set decided from the file's content is atomic: nobody writes
  between the read and the write.
- :class:`Conflict`: the page's change meets a value someone else wrote (HTTP 409), never a
  silent overwrite.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from ragexp.runtime import file_lock
from ragexp.runtime.atomic_file import atomic_write

__all__ = ["Conflict", "EditLock", "atomic_write", "lock_path"]


def lock_path(path: Path) -> Path:
    """The lock file of ``path``: ``<path>.lock`` beside it (kept: removing it would race a waiter)."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


class EditLock:
    """The lock of one edited file (module docstring), used as ``with lock: ...``. Re-entrant in a
    thread: a nested block neither waits nor takes the file lock a second time."""

    def __init__(self, path: Path) -> None:
        self.path = lock_path(path)
        self._thread = threading.RLock()
        self._depth = 0  # nesting of the thread holding _thread
        self._held: contextlib.ExitStack | None = None

    def __enter__(self) -> EditLock:
        self._thread.acquire()
        try:
            if self._depth == 0:
                held = contextlib.ExitStack()
                held.enter_context(file_lock.locked(file_lock.open_lock_file(self.path)))
                self._held = held
            self._depth += 1
        except BaseException:
            self._thread.release()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._depth -= 1
        if self._depth == 0 and self._held is not None:
            self._held, held = None, self._held
            held.close()
        self._thread.release()


class Conflict(Exception):
    """What the page changed in ``path`` was changed elsewhere since the page showed it; the
    message says what (HTTP 409)."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = Path(path)
        super().__init__(message)

    def http(self):
        from fastapi import HTTPException

        return HTTPException(status_code=409, detail={"message": str(self)})
