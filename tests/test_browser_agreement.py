"""The annotators' agreement on the first screen of the eval set's MLflow experiment, in headless Chromium.

A real ``ragexp run`` on alice's eval set logs a run to a sqlite store (in the eval set's default
experiment); ``ragexp evalset agreement alice.jsonl bob.jsonl`` notes the agreement there; a real
``mlflow server`` serves the store and Debian's Chromium opens the experiment as on a first visit:
the description above the runs table, folded to its first line, shows both kappas with their
intervals (not clipped by the fold, above the bottom of the screen) beside the run. Screenshot: ``test-artifacts/agreement-mlflow.png``;
``RAGEXP_UPDATE_SCREENSHOT=1`` copies it to ``docs/images/`` (docs/agreement.md's).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking.agreement_note import AGREEMENT_TAG
from tests.helpers.annotator_pair import ALICE, BOB, write
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.page_server import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS
REPO = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1600, "height": 1000}
UI_TIMEOUT_MS = 60_000


#: Where ``text`` (within one text node) is drawn: its lowest edge, and whether an ancestor that clips
#: its overflow (the folded description) hides any of it.
SHOWN_JS = """(text) => {
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const node = walker.currentNode, at = node.data.indexOf(text);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + text.length);
        const rects = [...range.getClientRects()];
        let clipped = rects.length === 0;
        for (let el = node.parentElement; el; el = el.parentElement) {
            const style = getComputedStyle(el);
            if (style.overflowX === "visible" && style.overflowY === "visible") continue;
            const box = el.getBoundingClientRect();
            clipped ||= rects.some(r => r.top < box.top - 1 || r.bottom > box.bottom + 1 || r.left < box.left - 1 || r.right > box.right + 1);
        }
        return {clipped, bottom: Math.max(...rects.map(r => r.bottom))};
    }
    return null;
}"""


def kappa_text(numbers: dict) -> str:
    """A kappa as the description writes it, from the stored numbers."""
    return f"kappa {numbers['kappa']:.2f} (95% CI {numbers['ci_low']:.2f} to {numbers['ci_high']:.2f})"


def test_the_experiments_first_screen_shows_the_agreement(tmp_path):
    corpus, _ = write_tiny_dataset(tmp_path)
    alice, bob = write(tmp_path / "alice.jsonl", ALICE), write(tmp_path / "bob.jsonl", BOB)
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    client = MlflowClient(uri)
    client.search_experiments(max_results=1)  # the schema migrated once, before the server and the run
    with mlflow_server(tmp_path, ["--backend-store-uri", uri], tmp_path / "mlflow-server.log", env=ENV) as (server, base):
        ragexp(tmp_path, "run", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={alice}",
               f"tracking.uri={uri}", "progress=false", "retrieval=bm25", "chunking=fixed")
        printed = ragexp(tmp_path, "evalset", "agreement", alice, bob, "--corpus", str(corpus), "--tracking-uri", uri).stdout
        wait_until_healthy(server, base, tmp_path / "mlflow-server.log")
        [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
        [run] = client.search_runs([experiment.experiment_id])
        numbers = json.loads(client.get_experiment(experiment.experiment_id).tags[AGREEMENT_TAG])
        expected = [f"answerability {kappa_text(numbers['answerable'])}", f"document relevance {kappa_text(numbers['relevance'])}"]
        assert f"kappa {numbers['answerable']['kappa']:.3f} (95% CI {numbers['answerable']['ci_low']:.3f}" in printed

        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(UI_TIMEOUT_MS)
                page.goto(f"{base}/#/experiments/{experiment.experiment_id}/runs")
                sync_api.expect(page.get_by_role("link", name=run.info.run_name, exact=True)).to_be_visible()
                for text in expected:  # not clipped by the folded description, and above the fold
                    shown = page.evaluate(SHOWN_JS, text)
                    assert shown is not None, f"{text!r} is not on the page"
                    assert not shown["clipped"] and shown["bottom"] <= VIEWPORT["height"], (text, shown)
                # the check sees the fold: the run description's link, two paragraphs down, is hidden by it
                assert page.evaluate(SHOWN_JS, "Open the ragexp view")["clipped"]
                page.mouse.move(0, 0)
                (REPO / "test-artifacts").mkdir(exist_ok=True)
                page.screenshot(path=REPO / "test-artifacts" / "agreement-mlflow.png")
            finally:
                browser.close()
    if os.environ.get("RAGEXP_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(REPO / "test-artifacts" / "agreement-mlflow.png", REPO / "docs" / "images" / "agreement-mlflow.png")
