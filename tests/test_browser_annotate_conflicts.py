"""The annotation page when it is not alone, in Debian's Chromium against a real server:

- two pages on one file edit the same question's gold answer: the second save is refused with a
  visible conflict bar, the file keeps the first page's answer, and reloading shows it;
- a corpus document is edited under an open page: a span selected in the outdated text is refused
  (nothing written), and after a reload the span saved before the edit is flagged stale on the
  page, with its offsets and quote unchanged in the file.

The screenshot of the conflict goes to ``test-artifacts/`` (``RAGEXP_UPDATE_SCREENSHOT=1`` copies it
to ``docs/images/``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ragexp.annotation.session import entry_id
from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import (
    drag_select,
    settled_save_state,
    start_page,
    stop_page,
)
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
DOCS_IMAGES = REPO / "docs" / "images"
TIMEOUT_MS = 180_000
QUESTION = "How long are webhooks retried?"

pytestmark = BROWSER_MARKS


@pytest.fixture
def served(tmp_path):
    """``ragexp evalset annotate`` over the tiny corpus (BM25 pool only: no model to load), one question queued."""
    corpus, _ = write_tiny_dataset(tmp_path)
    (tmp_path / "queue.jsonl").write_text(json.dumps({"query": QUESTION, "source": "log"}) + "\n", encoding="utf-8")
    evalset = tmp_path / "built.jsonl"
    server, url = start_page(tmp_path, ["evalset", "annotate", str(evalset), "--corpus", str(corpus), "--queries",
                                        "queue.jsonl", "--pipelines", "bm25", "--port", str(free_port())])
    try:
        with launched() as browser:
            yield browser, f"{url}#{entry_id(QUESTION)}", evalset, corpus
    finally:
        stop_page(server)


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_selector("#candidates .passage")
    return page


def type_gold_answer(page, text: str) -> str:
    page.keyboard.press("a")
    page.keyboard.type(text)
    page.keyboard.press("Tab")  # leaving the field saves it at once
    return settled_save_state(page, TIMEOUT_MS)


def saved_entry(evalset: Path) -> dict:
    sidecar = json.loads(evalset.with_name(f"{evalset.stem}.annotation.json").read_text(encoding="utf-8"))
    return next(e for e in sidecar["entries"] if e["query"] == QUESTION)


def test_two_pages_editing_the_same_question_never_overwrite_each_other(served):
    browser, url, evalset, _ = served
    first, second = open_page(browser, url), open_page(browser, url)
    assert type_gold_answer(second, "24 hours (second page)") == "saved"
    written = evalset.with_name(f"{evalset.stem}.annotation.json").read_bytes()

    assert type_gold_answer(first, "one day (first page)") == "conflict"
    bar = first.locator("#conflict-bar")
    bar.wait_for(state="visible")
    assert f"gold_answer of {entry_id(QUESTION)} changed since this page loaded it" in bar.inner_text()
    assert "nothing was written" in bar.inner_text()
    assert evalset.with_name(f"{evalset.stem}.annotation.json").read_bytes() == written
    assert saved_entry(evalset)["gold_answer"] == "24 hours (second page)"
    ARTIFACTS.mkdir(exist_ok=True)
    first.screenshot(path=str(ARTIFACTS / "annotate-conflict.png"))
    if os.environ.get("RAGEXP_UPDATE_SCREENSHOT") == "1":
        shutil.copy(ARTIFACTS / "annotate-conflict.png", DOCS_IMAGES / "annotate-conflict.png")

    bar.get_by_role("button", name="Reload the current file").click()  # the page shows what the file holds
    first.wait_for_function("() => document.getElementById('gold').value === '24 hours (second page)'")
    assert first.locator("#conflict-bar").count() == 0


def test_a_corpus_document_changed_under_an_open_page(served):
    browser, url, evalset, corpus = served
    page = open_page(browser, url)
    webhooks = '#candidates .passage-text[data-doc="webhooks"]'
    page.wait_for_selector(webhooks)
    kept = "exponential backoff for 24 hours"
    drag_select(page, webhooks, kept)
    assert settled_save_state(page, TIMEOUT_MS) == "saved"
    start = TINY_DOCS["webhooks"].index(kept)
    assert [(e["start"], e["quote"]) for e in saved_entry(evalset)["evidence"]] == [(start, kept)]

    # Someone edits the document while the page shows the old text: everything moves 20 characters.
    (corpus / "webhooks.md").write_text("# Webhooks\n\nA NEW INTRODUCTION.\n" + TINY_DOCS["webhooks"][len("# Webhooks\n"):],
                                        encoding="utf-8")
    written = evalset.with_name(f"{evalset.stem}.annotation.json").read_bytes()
    drag_select(page, webhooks, "times out after 10 seconds")  # offsets of the text the page still shows
    assert settled_save_state(page, TIMEOUT_MS) == "conflict"
    assert "the corpus changed under this page" in page.locator("#conflict-bar").inner_text()
    assert evalset.with_name(f"{evalset.stem}.annotation.json").read_bytes() == written  # nothing written

    page.reload()
    page.wait_for_selector("#spans .stale")
    spans = page.locator("#spans li")
    assert spans.count() == 1 and kept in spans.first.inner_text()
    assert "no longer reads the quote" in spans.first.locator(".stale").inner_text()
    assert [(e["start"], e["quote"]) for e in saved_entry(evalset)["evidence"]] == [(start, kept)]  # not moved
