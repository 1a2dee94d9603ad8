"""The edit session both pages (annotation, judge review) change their file through: a
compare-and-set per field, decided from the file's content, written whole under one lock across
processes.

- :func:`compare_and_set`: a page sends the new values of some fields and the values it showed
  (``before``). Per field: stored == new, nothing to do (a retried save whose reply was lost, or
  another page made the same edit); stored == before, written; anything else is a
  :class:`Conflict` naming the fields, with the stored values (``theirs``) and the ``before`` to
  send to keep the page's own values anyway ("keep mine"); nothing is written.
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
from collections.abc import Callable, Mapping
from pathlib import Path

from ragexp.runtime import file_lock
from ragexp.runtime.atomic_file import atomic_write

__all__ = ["Conflict", "EditLock", "atomic_write", "compare_and_set", "lock_path"]


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
    message says what (HTTP 409). ``theirs``: the stored values of the fields in conflict;
    ``before``: what the page sends as ``before`` to write its own values over them. Both ``None``
    when the change cannot be kept (the corpus changed under the page)."""

    def __init__(self, path: Path, message: str, *, theirs: dict | None = None, before=None) -> None:
        self.path = Path(path)
        self.theirs, self.before = theirs, before
        super().__init__(message)

    def detail(self) -> dict:
        """The 409 body: the message, and ``theirs``/``before`` when the page may keep its change."""
        body: dict = {"message": str(self)}
        if self.theirs is not None:
            body |= {"theirs": self.theirs, "before": self.before}
        return body

    def http(self):
        from fastapi import HTTPException

        return HTTPException(status_code=409, detail=self.detail())


def compare_and_set(path: Path, what: str, stored: Mapping, changes: Mapping, before: Mapping,
                    canonical: Callable[[str, object], object] = lambda key, value: value,
                    message: str | None = None) -> dict:
    """The fields of ``changes`` still to write to ``what`` (module docstring), values compared as
    ``canonical(field, value)``; :class:`Conflict` (saying ``message``, else naming the fields)
    when another writer changed any of them."""
    to_write, theirs = {}, {}
    for key, value in changes.items():
        now = canonical(key, stored[key])
        if now == canonical(key, value):
            continue
        if now != canonical(key, before[key]):
            theirs[key] = stored[key]
        to_write[key] = value
    if theirs:
        message = message or (f"{', '.join(theirs)} of {what} changed since this page loaded it (another page, editor "
                              "or process wrote it); nothing was written")
        raise Conflict(path, message, theirs=theirs, before={**before, **theirs})
    return to_write
