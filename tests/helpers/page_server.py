"""A ragexp page server (``evalset annotate``, ``judge review``) as a real subprocess for browser tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cli import ENV


def start_page(cwd: Path, args: list[str], timeout_s: float = 300) -> tuple[subprocess.Popen, str]:
    """``python -m ragexp.cli *args`` in its own process group; returns it and the URL it prints
    (fails with its output when it exits or prints none within ``timeout_s``)."""
    proc = subprocess.Popen([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"{' '.join(args[:2])} exited {proc.wait()}: {''.join(lines)[-2000:]}")
        lines.append(line)
        if (found := re.search(r"http://127\.0\.0\.1:\d+/", line)) is not None:
            return proc, found.group(0)
    raise AssertionError(f"no URL within {timeout_s:.0f} s: {''.join(lines)[-2000:]}")


def stop_page(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL after 20 s; nothing when it already exited."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
