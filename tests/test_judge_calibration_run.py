"""A run judges with the calibrated threshold and logs the calibration next to faithfulness.

``ragexp run`` on the tiny dataset with an OpenAI-compatible generator served by the scripted
server on 127.0.0.1 (its answers mix claims the context supports fully and in part, so the
lexical judge's threshold decides verdicts) and ``judge=lexical``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.judging.calibration.labels import (
    NOT_SUPPORTED,
    SUPPORTED,
    LabelledClaim,
    write_labels,
)
from ragexp.judging.judges import LexicalJudge
from ragexp.tracking import store
from ragexp.tracking.metric_names import results_view
from ragexp.tracking.run_logger import TAG_JUDGE_WARNING
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Per tiny-corpus context: one fully supported claim, and claims with 1 or 2 of 5 content words
# missing (support 0.8 and 0.6: unsupported at the default threshold, supported at 0.5).
ANSWER = ("Failed deliveries are retried with exponential backoff for 24 hours. "
          "Failed deliveries are retried for exactly 48 hours. "
          "The search endpoint allows 30 requests per minute for premium keys.")


def run(tmp_path: Path, tiny_dataset, server: FakeOpenAIServer, *overrides: str) -> subprocess.CompletedProcess:
    corpus, evalset = tiny_dataset
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MLFLOW_"))}
    env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OPENAI_API_KEY": "test-key",
                "OPENAI_BASE_URL": server.base_url})
    args = ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "tracking.experiment=calib", "progress=false",
            "retrieval=bm25", f"cache_dir={tmp_path / 'cache'}", "generator=openai", "judge=lexical", *overrides]
    return subprocess.run([sys.executable, "-m", "ragexp.cli", "run", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)


def separable_labels(path: Path) -> Path:
    """Supported claims have lexical support 1 or 2/3, unsupported ones 1/3 or 0: every threshold
    in (1/3, 2/3) agrees perfectly, so the fit rule picks 0.5."""
    rows = []
    for c in range(4):
        context = f"alpha beta gamma passage{c}"
        for k, (claim, label) in enumerate([("alpha beta gamma", SUPPORTED), ("alpha beta zeta", SUPPORTED),
                                            ("alpha zeta theta", NOT_SUPPORTED), ("zeta theta", NOT_SUPPORTED)]):
            rows.append(LabelledClaim(id=f"c{c}-{k}", context=context, claim=claim, human_label=label))
    return write_labels(path, rows)


def latest_run(tmp_path: Path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("calib").experiment_id], order_by=["attributes.start_time DESC"])
    return client, runs[0]


def judged_claims(client: MlflowClient, run_id: str) -> list[dict]:
    local = client.download_artifacts(run_id, "ragexp_results.json")
    rows = json.loads(Path(local).read_text())["per_query"]
    return [claim for row in rows for claim in row.get("claims", [])]


def test_a_run_uses_and_logs_the_calibrated_threshold(tmp_path, tiny_dataset):
    from ragexp.cli import main

    calibration = tmp_path / "lexical_calibration.json"
    labels = separable_labels(tmp_path / "toy_labels.csv")
    assert main(["judge", "calibrate", str(labels), "--judge", "lexical", "--folds", "2", "--out", str(calibration),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    fitted = json.loads(calibration.read_text())
    assert fitted["threshold"] == pytest.approx(0.5) and fitted["kappa"] == pytest.approx(1.0)

    with FakeOpenAIServer() as server:
        server.script(*[ok(ANSWER)] * 50)
        uncalibrated = run(tmp_path, tiny_dataset, server)
        assert uncalibrated.returncode == 0, uncalibrated.stderr[-3000:]
        client, plain = latest_run(tmp_path)
        calibrated = run(tmp_path, tiny_dataset, server, f"judge.calibration={calibration}")
        assert calibrated.returncode == 0, calibrated.stderr[-3000:]
        _, tuned = latest_run(tmp_path)
        refitted = {**fitted, "threshold": 0.7}  # the same path, rewritten: its verdicts must not come from the cache
        calibration.write_text(json.dumps(refitted))
        assert run(tmp_path, tiny_dataset, server, f"judge.calibration={calibration}").returncode == 0
        _, rewritten = latest_run(tmp_path)
        mismatched = run(tmp_path, tiny_dataset, server, f"judge.calibration={_for_another_judge(calibration)}")

    # Uncalibrated: the default threshold, and the plain warning in the summary and as a tag.
    warning = plain.data.tags[TAG_JUDGE_WARNING]
    assert warning.startswith("faithfulness comes from an uncalibrated judge (lexical")
    assert f"WARNING: {warning}" in uncalibrated.stdout
    assert plain.data.params["judge.calibration.set"] == "none"
    assert plain.data.params["judge.threshold_source"] == "default"
    assert float(plain.data.params["judge.effective_threshold"]) == pytest.approx(LexicalJudge.DEFAULT_THRESHOLD)
    assert "judge.calibration.cv_kappa" not in results_view(plain.data.metrics, plain.data.params)

    # Calibrated: the file's threshold decides every verdict, and its numbers are logged.
    params = tuned.data.params
    metrics = results_view(tuned.data.metrics, params)  # MLflow keys mapped back to results keys
    assert params["judge.calibration.set"] == "toy_labels" and params["judge.calibration.n"] == "16"
    assert params["judge.calibration.sha256"] == fitted["labels"]["sha256"]
    assert params["judge.threshold_source"] == "calibration"
    assert float(params["judge.effective_threshold"]) == pytest.approx(fitted["threshold"])
    assert metrics["judge.calibration.cv_kappa"] == pytest.approx(fitted["kappa"])
    assert metrics["judge.calibration.cv_accuracy"] == pytest.approx(fitted["accuracy"])
    assert TAG_JUDGE_WARNING not in tuned.data.tags  # kappa 1.0 >= 0.4
    assert "calibrated on 'toy_labels' (n=16, 2-fold cross-validation grouped by context" in calibrated.stdout

    before, after = judged_claims(client, plain.info.run_id), judged_claims(client, tuned.info.run_id)
    assert [c["score"] for c in before] == [c["score"] for c in after]  # same answers, same contexts
    for claim in after:
        assert claim["supported"] is (claim["score"] >= fitted["threshold"])
    for claim in before:
        assert claim["supported"] is (claim["score"] >= LexicalJudge.DEFAULT_THRESHOLD)
    flipped = [c for c in after if fitted["threshold"] <= c["score"] < LexicalJudge.DEFAULT_THRESHOLD]
    assert flipped, "the scripted answer must have claims whose verdict the calibration changes"
    assert metrics["faithfulness"] > results_view(plain.data.metrics, plain.data.params)["faithfulness"]

    assert rewritten.data.tags[store.TAG_CONFIG_HASH] != tuned.data.tags[store.TAG_CONFIG_HASH]
    for claim in judged_claims(client, rewritten.info.run_id):
        assert claim["supported"] is (claim["score"] >= 0.7)
    assert any(0.5 <= c["score"] < 0.7 for c in after)  # a verdict the rewrite changes

    # A calibration fitted for another judge: refused in one line, exit 2, before any run is logged.
    assert mismatched.returncode == 2
    assert mismatched.stderr.strip().count("\n") == 0, mismatched.stderr
    assert ("field 'judge.calibration': fitted for judge local_likelihood method=pmi model_id=smollm2-135m@0123, "
            "but the configured judge is lexical") in mismatched.stderr


def _for_another_judge(calibration: Path) -> Path:
    data = json.loads(calibration.read_text())
    data["judge"] = {"kind": "local_likelihood", "method": "pmi", "model_id": "smollm2-135m@0123"}
    other = calibration.with_name("for_local.json")
    other.write_text(json.dumps(data))
    return other
