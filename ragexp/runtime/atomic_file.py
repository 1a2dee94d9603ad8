"""Writing a file whole or not at all: the one way ragexp replaces a file it owns.

- :func:`atomic_write` replaces ``path`` with bytes or text (UTF-8).
- :func:`replacing` is the same for a writer that wants a path of its own to write to (a
  streamed JSON Lines file, ``shutil.copyfile``, ONNX Runtime's quantiser): it yields a partial
  path beside ``path``; when the block ends without an error the partial file is fsynced and
  renamed over ``path``, on any error it is removed and ``path`` is as it was.

The partial file is ``.<name>.<pid>.<thread>.partial`` in the same folder (a rename within one
file system is atomic; a name per process and thread, so concurrent writers never share one),
created with the user's umask like any file the user writes. A killed process leaves the old
file or the new one, never half of either (at worst a stray ``.partial`` beside it).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


def partial_path(path: Path) -> Path:
    """The partial file a write of ``path`` by this process and thread goes through."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a partial path to write; on success it is fsynced and renamed over ``path``."""
    path = Path(path)
    partial = partial_path(path)
    try:
        yield partial
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8, written as is) all at once."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path) as partial:
        partial.write_bytes(raw)
