"""``ragexp ui`` never reports a URL it does not serve, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from tests.helpers.cli import ENV
from tests.helpers.mlflow_server import free_port


def processes() -> dict[int, tuple[int, int, str]]:
    """``{pid: (ppid, pgid, command line)}`` of every process, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), int(fields[2]), cmdline)
    return found


def servers_on(port: int) -> list[int]:
    return [pid for pid, (_, _, cmd) in processes().items() if "mlflow" in cmd and f"--port {port}" in cmd]


def test_busy_port_fails_at_once_naming_it_and_starts_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "ui", "--port", str(port), "--tracking-uri",
                               f"sqlite:///{tmp_path / 'mlflow.db'}"], cwd=tmp_path, env=ENV, capture_output=True,
                              text=True, timeout=60, check=False)
        elapsed = time.monotonic() - started
    assert proc.returncode == 2 and elapsed < 5, (proc.returncode, elapsed)
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr and "Traceback" not in proc.stderr
    assert "http://" not in proc.stdout + proc.stderr  # no URL it does not serve
    assert servers_on(port) == [] and not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_serves_the_printed_url_and_stops_its_whole_process_group(tmp_path):
    db = tmp_path / "mlflow.db"
    client = MlflowClient(f"sqlite:///{db}")
    experiment_id = client.create_experiment("tiny-0123abcd")
    client.create_run(experiment_id, run_name="fixed-512c-64 · bm25", tags={store.TAG_KIND: "job"})
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "ragexp.cli", "ui", "--port", str(port), "--tracking-uri", f"sqlite:///{db}"],
                          cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while not any("all experiments" in line for line in lines) and time.monotonic() < deadline and ui.poll() is None:
            lines.append(ui.stdout.readline())
        text = "".join(lines)
        assert f"http://127.0.0.1:{port}/#/experiments/{experiment_id}/runs?viewStateShareKey=ragexp" in text, \
            text + ui.stderr.read() if ui.poll() is not None else text
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200  # the URL is served
        # MLflow's own guards stay on (ragexp passes no --allowed-hosts / --cors-allowed-origins):
        # another site reaching the store through a rebound name, or writing from its page, is refused
        assert httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": "evil.example"}, timeout=10).status_code == 403
        write = httpx.post(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/create", json={"name": "planted"},
                           headers={"Origin": "http://evil.example"}, timeout=10)
        assert write.status_code == 403 and client.get_experiment_by_name("planted") is None
        [server] = [pid for pid, (ppid, _, _) in processes().items() if ppid == ui.pid]
        group = processes()[server][1]
        assert group == server  # its own process group, which the command stops as a whole
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=60) == 0
    finally:
        if ui.poll() is None:
            ui.kill()
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # nothing of the group is left: server, uvicorn worker, any job runner
    assert servers_on(port) == []
