"""``ragexp gate`` knows whether the judge was checked, through the CLI end to end.

A real ``ragexp run`` (tiny dataset, an OpenAI-compatible generator scripted on 127.0.0.1 whose
answer mixes a supported claim with two the lexical judge rejects, ``judge=lexical``) logs to a
sqlite store. ``ragexp gate`` on it prints "UNVERIFIED" on its second line and for each gated
judge metric, never for a retrieval metric, and fails with ``--unverified fail``. Then the real
``ragexp judge review`` server takes a person's verdicts (sent as the page sends them) agreeing
with the judge on every sampled claim, so kappa is 1: the same gate says "verified", prints no
"UNVERIFIED", compares faithfulness on its PPI estimate from those labels, and passes with
``--unverified fail``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.fake_openai_server import FakeOpenAIServer, ok
from tests.helpers.page_server import start_page, stop_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ANSWER = ("Failed deliveries are retried with exponential backoff for 24 hours. "
          "Failed deliveries are retried for exactly 48 hours. "
          "The search endpoint allows 30 requests per minute for premium keys.")
SPEC = "defaults:\n  min_n: 1\nmetrics:\n  hit_rate_at_5:\n  faithfulness:\n"


def cli(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=tmp_path, env=env or os.environ.copy(),
                          capture_output=True, text=True, timeout=300)


def put(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + "api/review/label", data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json", "Origin": url.rstrip("/")})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def test_gate_marks_judge_metrics_unverified_until_a_review_clears_the_floor(tmp_path: Path, tiny_dataset) -> None:
    corpus, evalset = tiny_dataset
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MLFLOW_"))}
    with FakeOpenAIServer() as server:
        server.script(*[ok(ANSWER)] * 50)
        env.update({"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.base_url})
        done = cli(tmp_path, "run", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
                   f"tracking.uri={db}", "tracking.experiment=tiny", "progress=false", "retrieval=bm25",
                   f"cache_dir={tmp_path / 'cache'}", "generator=openai", "judge=lexical", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(db)
    [run] = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    run_id = run.info.run_id
    assert len(run.data.tags["ragexp.judge_key"]) == 16
    spec = tmp_path / "gate.yaml"
    spec.write_text(SPEC)
    gate = ["gate", "--baseline", run_id, "--candidate", run_id, "--spec", str(spec), "--tracking-uri", db]

    before = cli(tmp_path, *gate)
    assert before.returncode == 0, before.stdout + before.stderr
    lines = before.stdout.splitlines()
    assert lines[0] == "ragexp gate: PASS"
    assert lines[1].startswith("judge metrics UNVERIFIED") and "faithfulness" in lines[1] and "never reviewed" in lines[1]
    rows = {line.split()[0]: line for line in lines if line.startswith(("faithfulness", "hit_rate_at_5"))}
    assert "UNVERIFIED" in rows["faithfulness"] and "judge only, uncorrected" in rows["faithfulness"]
    assert "UNVERIFIED" not in rows["hit_rate_at_5"]
    failing = cli(tmp_path, *gate, "--unverified", "fail")
    assert failing.returncode == 1 and failing.stdout.startswith(
        "ragexp gate: UNVERIFIED (judge metrics unverified, never checked by a person: faithfulness)")

    labels = tmp_path / "labels.csv"
    page, url = start_page(tmp_path, ["judge", "review", run_id, "-n", "20", "--labels", str(labels),
                                      "--tracking-uri", db, "--port", "0"], timeout_s=180)
    try:
        claims = json.loads(urllib.request.urlopen(url + "api/review", timeout=30).read())["claims"]
        assert {c["judge_label"] for c in claims} == {"supported", "not_supported"}  # drawn across verdicts
        for claim in claims:
            reply = put(url, {"id": claim["id"], "label": claim["judge_label"], "before": ""})
        assert reply["done"] and reply["logged"], reply
        assert reply["agreement"]["kappa"] == pytest.approx(1.0)
        assert set(reply["ppi"]) == {"faithfulness", "claim_faithfulness"}
    finally:
        stop_page(page)
    tags = client.get_run(run_id).data.tags
    assert tags["ragexp.judge_review.judge_key"] == tags["ragexp.judge_key"]
    assert tags["ragexp.ppi"].startswith("faithfulness ")

    after = cli(tmp_path, *gate, "--unverified", "fail")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "UNVERIFIED" not in after.stdout
    lines = after.stdout.splitlines()
    assert lines[1].startswith("judge metrics verified: faithfulness: kappa 1.00")
    assert "PPI (human-corrected)" in next(line for line in lines if line.startswith("faithfulness"))
    refused = cli(tmp_path, *gate, "--min-kappa", "1.5")
    assert refused.returncode == 2 and "--min-kappa" in refused.stderr
