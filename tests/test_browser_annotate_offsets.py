"""A span selected with the mouse addresses the characters the page shows, in Debian's Chromium
against a real ``ragexp evalset annotate`` server, whatever the document holds before it:

- emoji (characters outside the Basic Multilingual Plane: one code point for Python, two UTF-16
  units for JavaScript);
- Windows line ends (``\\r\\n``: the HTML parser reads them as ``\\n``).

Both used to save a span whose offsets were shifted (after an emoji the save was refused, after
CRLF lines the wrong characters were silently stored as the quote) and to show passages cut short.
"""

from __future__ import annotations

import json
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

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

TIMEOUT_MS = 60_000
QUESTION = "When is the cake served and how long is the refund window?"
DOCUMENTS = {
    "party.md": "# Party\n\n🎉🎉 Party time 🎉! 👩‍👩‍👧 The cake is served at noon sharp.\n",
    "refunds.md": "# Refunds\r\n\r\nFirst line.\r\nSecond line.\r\nThe refund window is thirty days.\r\n",
}

pytestmark = BROWSER_MARKS


@pytest.fixture
def served(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in DOCUMENTS.items():
        (corpus / name).write_bytes(text.encode("utf-8"))
    (tmp_path / "queue.jsonl").write_text(json.dumps({"query": QUESTION, "source": "log"}) + "\n", encoding="utf-8")
    evalset = tmp_path / "built.jsonl"
    server, url = start_page(tmp_path, ["evalset", "annotate", str(evalset), "--corpus", str(corpus), "--queries",
                                        "queue.jsonl", "--pipelines", "bm25", "--port", str(free_port())])
    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f"{url}#{entry_id(QUESTION)}")
            page.wait_for_selector("#candidates .passage, #candidates p")  # the pool, or "no candidate"
            yield page, evalset
    finally:
        stop_page(server)


def search_and_select(page, query: str, text: str) -> str:
    page.keyboard.press("/")
    page.keyboard.type(query)
    page.keyboard.press("Enter")
    page.wait_for_selector("#search-results .passage")
    drag_select(page, '#search-results .passage[data-index="0"] .passage-text', text)
    return settled_save_state(page, TIMEOUT_MS)


def saved_spans(evalset: Path) -> list[dict]:
    sidecar = json.loads(evalset.with_name(f"{evalset.stem}.annotation.json").read_text(encoding="utf-8"))
    return next(e for e in sidecar["entries"] if e["query"] == QUESTION)["evidence"]


@pytest.mark.parametrize(("doc_id", "query", "selected"), [("party", "cake served", "noon sharp"),
                                                           ("refunds", "refund window", "thirty days")])
def test_a_selection_after_emoji_or_crlf_saves_the_selected_characters(served, doc_id, query, selected):
    page, evalset = served
    text = DOCUMENTS[f"{doc_id}.md"]
    assert search_and_select(page, query, selected) == "saved"
    # the passage is shown whole (it used to lose one character at its end per emoji before it)
    assert page.locator('#search-results .passage[data-index="0"] .passage-text').text_content() == text  # a short document: all of it
    [span] = saved_spans(evalset)
    start = text.index(selected)
    assert span == {"doc_id": doc_id, "start": start, "end": start + len(selected), "quote": selected, "grade": 1}
    assert page.locator("#search-results mark.pos").all_text_contents() == [selected]
