"""Start a real ``mlflow server`` on 127.0.0.1 for a test, and always stop it.

Shared by the tests that need a tracking server (the UI test, the server-backed sweep test)::

    with mlflow_server(tmp_path, ["--backend-store-uri", f"sqlite:///{db}"], log) as (server, base):
        ...                                    # the server imports and migrates meanwhile
        wait_until_healthy(server, base, log)  # GET /health answers 200
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

SERVER_START_TIMEOUT_S = 180  # a loaded 2-core machine needs over a minute to import and migrate


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-3000:]


def wait_until_healthy(server: subprocess.Popen, base: str, log: Path, timeout_s: float = SERVER_START_TIMEOUT_S) -> None:
    """Poll ``GET /health`` until it answers 200; fail with the server log if it dies or takes too long."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise AssertionError(f"mlflow server exited with {server.returncode}\n{log_tail(log)}")
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"mlflow server not healthy after {timeout_s} s\n{log_tail(log)}")
        time.sleep(0.5)


@contextlib.contextmanager
def mlflow_server(cwd: Path, store_args: Sequence[str], log: Path, env: Mapping[str, str] | None = None
                  ) -> Iterator[tuple[subprocess.Popen, str]]:
    """``mlflow server STORE_ARGS`` on a free port of 127.0.0.1; yields (process, base URL) at once,
    without waiting for it to answer. One worker: uvicorn's multi-worker supervisor kills workers
    that answer its health ping late, which happens on a loaded machine. Job execution is off.
    The server's whole process group is stopped afterwards, whatever happened."""
    port = free_port()
    command = [sys.executable, "-m", "mlflow", "server", *store_args, "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1"]
    server_env = {**(env if env is not None else os.environ), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log.open("w") as log_file:
        server = subprocess.Popen(command, cwd=cwd, env=server_env, stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
