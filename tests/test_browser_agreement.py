"""Two annotators' agreement where people read it, in Debian's Chromium.

- MLflow: a real ``ragexp run`` on alice's eval set logs a run to a sqlite store (in the eval set's
  default experiment); ``ragexp evalset agreement alice.jsonl bob.jsonl`` notes the agreement there;
  a real ``mlflow server`` serves the store and the experiment opens as on a first visit: the
  description above the runs table, folded to its first line, shows both kappas with their
  intervals (not clipped by the fold, above the bottom of the screen) beside the run.
- The annotation page: ``--queue --adjudicator`` then ``ragexp evalset annotate`` shows the
  disputed items with both sides, and a third annotator settles one with the keyboard.

Screenshots: ``test-artifacts/agreement-mlflow.png`` and ``agreement-adjudication.png``;
``RAGEXP_UPDATE_SCREENSHOT=1`` copies them to ``docs/images/`` (docs/agreement.md's)."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking.agreement_note import AGREEMENT_TAG
from tests.helpers.annotator_pair import ALICE, BOB, write
from tests.helpers.chromium import BROWSER_MARKS, UI_TIMEOUT_MS, VIEWPORT, screenshot
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import free_port, mlflow_server, wait_until_healthy
from tests.helpers.page_server import settled_save_state, start_page, stop_page
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS


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


def test_the_experiments_first_screen_shows_the_agreement(tmp_path, page):
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

        page.goto(f"{base}/#/experiments/{experiment.experiment_id}/runs")
        sync_api.expect(page.get_by_role("link", name=run.info.run_name, exact=True)).to_be_visible()
        for text in expected:  # not clipped by the folded description, and above the fold
            shown = page.evaluate(SHOWN_JS, text)
            assert shown is not None, f"{text!r} is not on the page"
            assert not shown["clipped"] and shown["bottom"] <= VIEWPORT["height"], (text, shown)
        # the check sees the fold: the run description's link, two paragraphs down, is hidden by it
        assert page.evaluate(SHOWN_JS, "Open the ragexp view")["clipped"]
        screenshot(page, "agreement-mlflow.png")


def test_a_third_annotator_adjudicates_the_queue_on_the_page(tmp_path, page):
    """``--queue --adjudicator`` then ``ragexp evalset annotate``: the settled items are done, the
    others wait for review; a disputed item shows its reasons, both sides and the one passage they
    disputed with both verdicts; ``x``, ``u`` and ``Ctrl+Enter`` settle it under the adjudicator's name
    (the full walk: tests/test_browser_adjudication.py)."""
    corpus, _ = write_tiny_dataset(tmp_path)
    alice, bob = write(tmp_path / "alice.jsonl", ALICE), write(tmp_path / "bob.jsonl", BOB)
    queue = tmp_path / "adjudicated.jsonl"
    ragexp(tmp_path, "evalset", "agreement", alice, bob, "--corpus", str(corpus), "--queue", str(queue), "--adjudicator", "carol",
           "--no-log")
    server, url = start_page(tmp_path, ["evalset", "annotate", str(queue), "--corpus", str(corpus), "--port",
                                        str(free_port()), "--pipelines", "bm25"])
    try:
        page.goto(url)
        sync_api.expect(page.locator("#queue li .badge")).to_have_text(
            ["review 2", "done", "review 1", "done", "review 2", "review 2", "done", "review 2", "review 1", "review 1"])
        page.locator("#queue li[data-id=i3]").click()
        sync_api.expect(page.locator("#query")).to_have_text("question i3?")
        sync_api.expect(page.locator("#candidates-title")).to_have_text("Passages to judge")
        sync_api.expect(page.locator("#review-reason")).to_contain_text(
            "Judge these queued passages (1 not judged yet): alice and bob disagree: answerable: alice yes, bob no; keys: alice relevant, bob not relevant")
        passages = page.locator("#candidates .passage .passage-text")
        sync_api.expect(passages).to_have_count(1)  # the span alice judged relevant and bob not
        shown = passages.first.evaluate("e => [...e.childNodes].filter(n => !n.classList || !n.classList.contains('context'))"
                                        ".map(n => n.textContent).join('')")
        assert shown == "You can have two active keys at once."  # the passage itself, its context around it
        sync_api.expect(page.locator("#candidates .passage .verdict")).to_have_text(["alice: relevant", "bob: not relevant"])
        sync_api.expect(page.locator("#adjudication")).to_contain_text("answerable")
        screenshot(page, "agreement-adjudication.png")
        page.keyboard.press("x")
        assert settled_save_state(page, UI_TIMEOUT_MS) == "saved"
        page.keyboard.press("u")
        assert settled_save_state(page, UI_TIMEOUT_MS) == "saved"
        page.keyboard.press("Control+Enter")
        sync_api.expect(page.locator("#query")).to_have_text("question i5?")
        assert settled_save_state(page, UI_TIMEOUT_MS) == "saved"
        sync_api.expect(page.locator("#queue li[data-id=i3] .badge")).to_have_text("done")
    finally:
        stop_page(server)
    adjudicated = {obj["id"]: obj for obj in map(json.loads, queue.read_text().splitlines()[1:])}
    assert sorted(adjudicated) == ["i2", "i3", "i4", "i7"]  # the three settled and i3
    assert adjudicated["i3"]["annotator"] == "carol" and adjudicated["i3"]["answerable"] is False
    assert [(e["doc_id"], e["start"], e["end"], e.get("grade", 1)) for e in adjudicated["i3"]["evidence"]] == [("keys", 25, 62, 0)]
