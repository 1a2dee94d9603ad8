"""A tracking store that goes away mid-run loses nothing: results stay on disk, `ragexp upload` logs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking.metric_names import results_view

pytestmark = pytest.mark.slow


class _StoreThatDiesAfterStartup(BaseHTTPRequestHandler):
    """Answers MLflow's start-up calls (probe, experiment lookup), then 503 for every write."""

    calls: list[str] = []

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server API
        self.calls.append(self.path)
        self._route()

    def _route(self) -> None:
        if "experiments/search" in self.path:
            self._reply(200, {"experiments": []})
        elif "experiments/get-by-name" in self.path:
            self._reply(200, {"experiment": {"experiment_id": "1", "name": "tiny", "lifecycle_stage": "active",
                                             "artifact_location": "/nonexistent"}})
        else:
            self._reply(503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "store down"})

    def do_POST(self):  # noqa: N802
        self.calls.append(self.path)
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        self._route()

    def log_message(self, *args):
        pass


def test_outage_mid_run_keeps_results_and_upload_logs_them(tiny_dataset, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StoreThatDiesAfterStartup)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    corpus, evalset = tiny_dataset
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ragexp.cli", "run", "dataset=evalset", f"dataset.corpus={corpus}",
             f"dataset.evalset={evalset}", f"tracking.uri=http://127.0.0.1:{server.server_port}", "tracking.experiment=tiny",
             "retrieval=bm25", "progress=false", f"hydra.run.dir={tmp_path}/out"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )
    finally:
        server.shutdown()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "could not log to the tracking store after 3 attempts" in proc.stderr
    assert f"ragexp upload {tmp_path}/out" in proc.stderr
    assert sum("runs/create" in c for c in _StoreThatDiesAfterStartup.calls) == 3
    saved = json.loads((tmp_path / "out" / "ragexp_results.json").read_text())

    db = tmp_path / "later.db"
    up = subprocess.run([sys.executable, "-m", "ragexp.cli", "upload", str(tmp_path / "out"), "--tracking-uri", f"sqlite:///{db}"],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    logged = results_view(runs[0].data.metrics, runs[0].data.params)  # MLflow keys mapped back to results keys
    for name, value in saved["aggregates"].items():
        assert logged[name] == pytest.approx(value, abs=0, rel=0)
    assert Path(tmp_path / "out" / "resolved.yaml").exists()


def test_upload_refuses_a_folder_that_is_not_a_run(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "upload", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "not a ragexp run output folder" in proc.stderr
