"""Files a page edits: written whole or not at all, guarded by an etag.

- ``etag_of(path)``: ``"sha256-<hex>"`` of the file's bytes (``"absent"`` when there is none), so
  two pages that loaded the same content agree, and any other writer (an editor, a second page,
  a restarted server) changes it.
- ``atomic_write(path, data)``: a temporary file beside ``path`` (user's umask), flushed and
  fsynced, renamed over it; a killed process leaves the old file or the new one, never half.
- ``GuardedFile.replace(if_match, data)``: writes only when the page's etag is the file's current
  one, else raises :class:`Conflict` (HTTP 409 with the current etag), never a silent overwrite.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

ABSENT = "absent"


def etag_of(path: Path) -> str:
    try:
        return "sha256-" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32]
    except FileNotFoundError:
        return ABSENT


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) all at once; on failure ``path`` is as it was."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        with partial.open("wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class Conflict(Exception):
    """The file changed since the page read it: ``current`` is its etag now; ``message`` (optional)
    says what changed."""

    def __init__(self, path: Path, current: str, message: str | None = None) -> None:
        self.path = Path(path)
        self.current = current
        super().__init__(message or f"{self.path} changed since this page loaded it (another page, editor or process wrote it)")

    def http(self):
        from fastapi import HTTPException

        return HTTPException(status_code=409, detail={"message": str(self), "etag": self.current})


class GuardedFile:
    """One file written by several requests: each write checks the etag under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()

    def etag(self) -> str:
        return etag_of(self.path)

    def check(self, if_match: str | None) -> None:
        """Raise :class:`Conflict` unless ``if_match`` is the current etag (hold :attr:`lock`)."""
        current = self.etag()
        if if_match != current:
            raise Conflict(self.path, current)

    def replace(self, if_match: str | None, data: bytes | str) -> str:
        """Write ``data`` when ``if_match`` is current; return the new etag."""
        with self.lock:
            self.check(if_match)
            atomic_write(self.path, data)
            return self.etag()
