"""``ragexp judge review`` in headless Chromium: a person labels a run's claims with the keyboard.

A real ``ragexp run`` with the cheapest offline generator and judge (``generator=extractive
judge=lexical``, the extractive generator's overlap floor lowered so most of the tiny eval set is
answered) logs to a sqlite store; the real ``ragexp judge review`` server on 127.0.0.1 serves the
page; Debian's Chromium (never a downloaded browser) labels every sampled claim with ``y`` / ``n``
/ ``s``. Then the labels CSV holds exactly those verdicts in the labels format (read back by the
labels reader and by ``ragexp judge agreement``), and the run in MLflow holds ``judge_review/*``
metrics equal to a hand computation and scikit-learn's kappa, and the labels as an artifact. A
second page on the same file changes one verdict (it lands) and the first page's different verdict
on that claim ends in a visible conflict instead of an overwrite; "Keep mine" then writes it over theirs.

Screenshot: ``test-artifacts/judge-review.png``; ``RAGEXP_UPDATE_SCREENSHOT=1`` generates with the
local model instead (``generator=local``, ~4 min: its answers are what a judge disagrees with a
person about; the extractive generator copies context, so the lexical judge calls all of it
supported) and copies the screenshot to ``docs/images/judge-review.png`` (docs/judging.md's).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from sklearn.metrics import cohen_kappa_score

from ragexp.evaluation.results import RunResults
from ragexp.judging.calibration.labels import label_of, read_labels
from tests.helpers.chromium import BROWSER_MARKS, UPDATE_SCREENSHOTS, launched, new_page, screenshot
from tests.helpers.cli import ragexp
from tests.helpers.page_server import start_page, stop_page
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

VIEWPORT = {"width": 1400, "height": 900}
KEYS = {"y": "supported", "n": "not_supported", "s": "skip"}
GENERATOR = ["generator=local"] if UPDATE_SCREENSHOTS else ["generator=extractive", "+generator.min_overlap=0.1"]
PATTERN = "ynsyn"  # the verdicts typed, claim after claim (repeated if there are more claims)

pytestmark = [*BROWSER_MARKS, pytest.mark.timeout(600)]


def test_a_person_labels_claims_with_the_keyboard_and_agreement_reaches_mlflow(tmp_path: Path) -> None:
    corpus, evalset = write_tiny_dataset(tmp_path)
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
           f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny", "progress=false", "retrieval=bm25",
           *GENERATOR, "judge=lexical", f"cache_dir={tmp_path / 'cache'}")
    client = MlflowClient(f"sqlite:///{db}")
    [run] = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    run_id = run.info.run_id
    labels = tmp_path / "labels.csv"

    server, url = start_page(tmp_path, ["judge", "review", run_id, "-n", "20", "--labels", str(labels), "--tracking-uri", f"sqlite:///{db}",
                                       "--port", "0"], timeout_s=180)
    try:
        with launched() as browser:
            page = new_page(browser, VIEWPORT)
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]")
            claims = page.evaluate("fetch('/api/review').then(r => r.json())")["claims"]
            assert len(claims) >= 4, claims  # enough to disagree on
            assert all(c["evidence_by"] == "judge" for c in claims if c["evidence"])
            first = claims[0]
            if first["evidence"]:
                sync_api.expect(page.locator("#context mark")).to_have_text(first["context"][slice(*first["evidence"])])
            typed = {}
            for index, claim in enumerate(claims):
                key = PATTERN[index % len(PATTERN)]
                sync_api.expect(page.locator("#claim")).to_have_text(claim["claim"])
                page.keyboard.press(key)
                typed[claim["id"]] = KEYS[key]
            sync_api.expect(page.locator("#logged")).to_contain_text("Logged to run")
            sync_api.expect(page.locator("#save-status")).to_have_text("saved")
            # the PPI panel: the corrected faithfulness, and the labels a chosen width needs
            sync_api.expect(page.locator("#ppi")).to_contain_text("judge alone")
            page.locator("#ppi-width").select_option("0.05")
            sync_api.expect(page.locator("#ppi-needed")).to_contain_text(re.compile(r": \d+ more"))
            page.keyboard.press("k")  # back one: its verdict and the judge's are both shown
            screenshot(page, "judge-review.png")

            # A second page on the same labels file opens with the first page's verdicts; it
            # changes the first claim's verdict (lands), then the first page, still showing its
            # own older verdict, gives that claim a third one: a visible conflict, nothing written
            # until the person clicks Keep mine.
            first_id = claims[0]["id"]
            mine = typed[first_id]
            theirs = next(v for v in ("supported", "not_supported") if v != mine)
            third = next(v for v in KEYS.values() if v not in (mine, theirs))
            key_of = {verdict: key for key, verdict in KEYS.items()}
            item = f'#claim-list li[data-id="{first_id}"]'
            other = new_page(browser, VIEWPORT)
            other.goto(url)
            other.wait_for_selector("body[data-ready=true]")
            sync_api.expect(other.locator(item)).to_have_attribute("data-state", mine)
            other.locator(item).click()
            other.keyboard.press(key_of[theirs])
            sync_api.expect(other.locator(item)).to_have_attribute("data-state", theirs)
            sync_api.expect(other.locator("#save-status")).to_have_text("saved")
            typed[first_id] = theirs
            page.locator(item).click()
            page.keyboard.press(key_of[third])
            sync_api.expect(page.locator("#conflict-bar")).to_contain_text(f"{first_id} was marked")
            sync_api.expect(page.locator("#save-status")).to_contain_text("conflict")
            # "Keep mine": the first page's verdict goes over theirs and is the one stored
            page.locator("#conflict-bar").get_by_role("button", name="Keep mine").click()
            sync_api.expect(page.locator("#save-status")).to_have_text("saved")
            sync_api.expect(page.locator(item)).to_have_attribute("data-state", third)
            typed[first_id] = third
    finally:
        stop_page(server)

    rows = {row.id: row for row in read_labels(labels)}
    assert list(rows) == [c["id"] for c in claims]
    for claim in claims:
        row, verdict = rows[claim["id"]], typed[claim["id"]]
        assert row.human_label == ("" if verdict == "skip" else verdict)
        assert row.note == ("skipped" if verdict == "skip" else "")
        assert (row.claim, row.context, row.judge_label) == (claim["claim"], claim["context"], claim["judge_label"])

    compared = [rows[c["id"]] for c in claims if typed[c["id"]] != "skip"]
    human, judge = [r.human_label for r in compared], [r.judge_label for r in compared]
    metrics = client.get_run(run_id).data.metrics
    assert metrics["judge_review/n"] == len(compared)
    assert metrics["judge_review/skipped"] == len(claims) - len(compared)
    assert metrics["judge_review/accuracy"] == pytest.approx(sum(h == j for h, j in zip(human, judge)) / len(compared))
    # kappa weighs each labelled claim by its verdict's count in the run over that verdict's labels
    results = RunResults.load(client.download_artifacts(run_id, "ragexp_results.json", str(tmp_path)))
    counts = Counter(label_of(v.supported) for row in results.per_query if (row.judge_context or "").strip()
                     for v in row.claims or () if v.supported is not None)
    labelled = Counter(judge)
    weights = [counts[j] / labelled[j] for j in judge]
    assert metrics["judge_review/kappa"] == pytest.approx(cohen_kappa_score(human, judge, sample_weight=weights), abs=1e-12)
    if len(set(judge)) > 1:  # the extractive generator copies context: the lexical judge may call all supported
        assert metrics["judge_review/kappa_ci_low"] <= metrics["judge_review/kappa"] <= metrics["judge_review/kappa_ci_high"]
    else:
        assert "judge_review/kappa_ci_low" not in metrics  # kappa is 0 by construction: no interval
    logged = Path(client.download_artifacts(run_id, "judge_review/labels.csv", str(tmp_path)))
    assert [(r.id, r.human_label) for r in read_labels(logged)] == [(i, rows[i].human_label) for i in rows]

    agreement = ragexp(tmp_path, "judge", "agreement", str(labels))
    assert f"claims compared: {len(compared)}" in agreement.stdout
