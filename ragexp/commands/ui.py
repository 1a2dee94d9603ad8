"""``ragexp ui``: the MLflow UI on the configured store, bound to loopback unless told otherwise.

The port is checked before anything slow happens: when it is taken the command fails at once,
naming it (a URL is only printed once the server answers on it, so it never points at another
program on that port). The server runs in its own process group with MLflow's job runner off
(``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``: no ``huey_consumer`` children); on Ctrl+C,
SIGTERM, SIGHUP, or when the server dies, the whole group is stopped. The printed URL opens the newest
experiment in its ragexp view (headline metrics as columns, best hit rate@5 first).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.web.browser_ports import check_browser_port, next_open_port

START_TIMEOUT_S = 180.0  # a loaded 2-core machine needs over a minute to import MLflow and migrate
STOP_TIMEOUT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-uri", default=None, help="store to show (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=5000, help="port (default 5000); a taken port fails at once")


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`RagexpInputError` naming ``host:port`` when something already listens there
    (bound the way the server binds it, so a port in TIME_WAIT is not reported busy), or when
    browsers refuse the port (:mod:`ragexp.web.browser_ports`)."""
    if not 0 < port < 65536:
        raise RagexpInputError(f"{port} is not a TCP port (1-65535)", field="--port")
    check_browser_port(port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            raise RagexpInputError(f"port {port} on {host} is already in use ({err.strerror}); stop what runs there or "
                                   f"pick another port, e.g. --port {next_open_port(port)}", field="--port") from None


def _healthy(base: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def _stop(server: subprocess.Popen) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    with contextlib.suppress(ProcessLookupError):  # stragglers that outlived the group leader
        os.killpg(server.pid, signal.SIGKILL)


def newest_view_path(client) -> str:
    """The route of the newest experiment's ragexp view, or the experiment list when there is none."""
    from ragexp.tracking import experiments, store

    candidates = sorted(client.search_experiments(), key=lambda e: e.last_update_time or 0, reverse=True)
    for experiment in candidates:
        if client.search_runs([experiment.experiment_id], filter_string=f"tags.`{store.TAG_KIND}` = 'job'", max_results=1):
            return "/" + experiments.runs_link(experiment.experiment_id)
    return "/"


def run(args: argparse.Namespace) -> int:
    check_port_free(args.host, args.port)  # before the slow MLflow import
    from ragexp.commands._runs import client_for

    client, uri = client_for(args)
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    base = f"http://{shown_host if ':' not in shown_host else f'[{shown_host}]'}:{args.port}"
    # One worker: several workers on a 2-core machine kept dying and never became healthy.
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", args.host,
               "--port", str(args.port), "--workers", "1"]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log_file = tempfile.NamedTemporaryFile(prefix="ragexp-ui-", suffix=".log", delete=False)  # noqa: SIM115 - outlives this call
    server = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    # SIGTERM and SIGHUP (a closed terminal) stop it like Ctrl+C: the server has its own session and
    # would otherwise outlive this process.
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(base):
            if server.poll() is not None:
                tail = Path(log_file.name).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
                print(f"ragexp ui: error: the MLflow server exited with code {server.returncode} before serving "
                      f"{base}: {tail[0][:300]} (log: {log_file.name})", file=sys.stderr)
                return 1
            if time.monotonic() > deadline:
                print(f"ragexp ui: error: the MLflow server did not answer on {base} within {START_TIMEOUT_S:.0f} s "
                      f"(log: {log_file.name})", file=sys.stderr)
                return 1
            time.sleep(0.5)
        print(f"MLflow UI for {uri}\n  runs of the newest experiment, headline metrics first: {base}{newest_view_path(client)}\n"
              f"  all experiments: {base}/\n(Ctrl+C to stop; server log: {log_file.name})", flush=True)
        server.wait()
        print(f"ragexp ui: the MLflow server exited with code {server.returncode} (log: {log_file.name})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(server)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
