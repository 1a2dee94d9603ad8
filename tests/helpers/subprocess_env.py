"""Instrumenting a real ``ragexp`` subprocess, and synchronising a test with it on marker files."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: How often a test looks for a marker file (and a held subprocess for its release file): a poll
#: interval, not a wait for a state; every wait has a deadline.
POLL_S = 0.05


def env_with_sitecustomize(env: Mapping[str, str], folder: Path, source: str) -> dict[str, str]:
    """``env`` for a subprocess that runs ``source`` as its ``sitecustomize`` at start-up (written
    to ``folder``, put first on ``PYTHONPATH``): how a test instruments a real ``ragexp`` process."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(source, encoding="utf-8")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))}


#: The ``sitecustomize`` of :func:`env_holding_at`: wraps ``module.owner.attribute``; its
#: ``call``-th call writes the marker file, then waits (at most ``timeout_s``) for the release file
#: before it goes on. A signal's handler runs in the main thread during that wait as anywhere else.
_HOLD = """
import functools
import importlib
import os
import time
from pathlib import Path

_marker, _release = Path({marker!r}), Path({release!r})
_owner = importlib.import_module({module!r})
for _name in {owner_path!r}:
    _owner = getattr(_owner, _name)
_original = getattr(_owner, {attribute!r})
_calls = []


@functools.wraps(_original)
def _held(*args, **kwargs):
    _calls.append(None)
    if len(_calls) == {call}:
        _marker.with_suffix(".tmp").write_text(str(os.getpid()), encoding="utf-8")
        _marker.with_suffix(".tmp").replace(_marker)
        deadline = time.monotonic() + {timeout_s}
        while not _release.exists() and time.monotonic() < deadline:
            time.sleep({poll_s})
    return _original(*args, **kwargs)


setattr(_owner, {attribute!r}, _held)
"""


@dataclass(frozen=True)
class Hold:
    """A point where an instrumented subprocess stops and says so (see :func:`env_holding_at`)."""

    marker: Path
    release_file: Path

    def wait(self, process: subprocess.Popen, timeout_s: float) -> None:
        """Return once the process has reached the point; fail if it ends first or takes longer."""
        deadline = time.monotonic() + timeout_s
        while not self.marker.exists():
            if process.poll() is not None:
                stderr = process.stderr.read()[-3000:] if process.stderr else ""
                raise AssertionError(f"the process ended ({process.returncode}) before {self.marker.name}:\n{stderr}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the process did not reach {self.marker.name} within {timeout_s} s")
            time.sleep(POLL_S)

    def release(self) -> None:
        """Let the held process go on."""
        self.release_file.write_text("", encoding="utf-8")


def env_holding_at(env: Mapping[str, str], folder: Path, target: str, call: int = 1,
                   timeout_s: float = 300) -> tuple[dict[str, str], Hold]:
    """``env`` for a subprocess that, on the ``call``-th call of ``target`` (``"module:attr"`` or
    ``"module:Class.method"``), writes a marker file and waits for :meth:`Hold.release` (or
    ``timeout_s``) before making the call; and the :class:`Hold` a test waits on. This way a test
    acts while the process is at a known point instead of sleeping and hoping it got there."""
    module, _, qualname = target.partition(":")
    *owner_path, attribute = qualname.split(".")
    name = f"{qualname}-{call}"
    hold = Hold(marker=folder / f"{name}.reached", release_file=folder / f"{name}.release")
    source = _HOLD.format(marker=str(hold.marker), release=str(hold.release_file), module=module,
                          owner_path=owner_path, attribute=attribute, call=call, timeout_s=timeout_s, poll_s=POLL_S)
    return env_with_sitecustomize(env, folder, source), hold
