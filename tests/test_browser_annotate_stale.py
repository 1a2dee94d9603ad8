"""The reanchor round trip ends in the annotation page's stale-span view, in Debian's Chromium
against a real server: a corpus edit moves two spans (``ragexp evalset reanchor`` moves them) and
changes one (it cannot: exit 1); the page opens on the changed question with its span flagged
stale and a "stale" badge in the queue; a person marks the new text and removes the stale span,
and the eval set then loads against the new corpus with nothing stale and nothing moved.

The screenshot goes to ``test-artifacts/annotate-stale.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragexp.cli import main
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import evalset_to_jsonl, load_evalset
from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import drag_select, settled_save_state, start_page, stop_page
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
TIMEOUT_MS = 180_000
CHANGED_QUERY = "Can I rotate an API key without downtime?"
NEW_TEXT = "there is no outage"

pytestmark = BROWSER_MARKS


def test_a_span_reanchor_could_not_move_is_re_marked_in_the_stale_view(tmp_path, capsys):
    corpus, quoted = write_tiny_dataset(tmp_path)
    resolved = tmp_path / "set.jsonl"
    resolved.write_text(evalset_to_jsonl(load_evalset(quoted, load_corpus(corpus)), load_corpus(corpus)), encoding="utf-8")
    (corpus / "webhooks.md").write_text("Release notes moved to the changelog.\n\n" + TINY_DOCS["webhooks"], encoding="utf-8")
    keys = TINY_DOCS["keys"].replace("there is no downtime", NEW_TEXT)
    (corpus / "keys.md").write_text(keys, encoding="utf-8")
    moved = tmp_path / "set.v2.jsonl"
    assert main(["evalset", "reanchor", str(resolved), "--corpus", str(corpus), "--output", str(moved)]) == 1
    assert "3 unchanged, 2 moved, 0 re-found fuzzily, 1 changed, 0 vanished" in capsys.readouterr().out

    server, url = start_page(tmp_path, ["evalset", "annotate", str(moved), "--corpus", str(corpus), "--pipelines", "bm25",
                                        "--port", str(free_port())])
    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)  # no question named: the page opens on the stale one
            page.wait_for_selector("#spans .stale")
            assert page.locator("#query").inner_text() == CHANGED_QUERY
            assert "no longer reads the quote" in page.locator("#spans .stale").inner_text()
            assert page.locator("#queue .badge.stale").count() == 1
            assert "1 stale" in page.locator("#queue-count").inner_text()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "annotate-stale.png"))

            passage = '#candidates .passage-text[data-doc="keys"]'
            page.wait_for_selector(passage)
            drag_select(page, passage, NEW_TEXT)
            assert settled_save_state(page, TIMEOUT_MS) == "saved"
            page.locator('#spans button[data-remove="0"]').click()  # the stale span, listed first
            assert settled_save_state(page, TIMEOUT_MS) == "saved"
            page.wait_for_function("() => !document.querySelector('#spans .stale')")
            assert page.locator("#queue .badge.stale").count() == 0
    finally:
        stop_page(server)

    rows = {row["id"]: row for row in map(json.loads, moved.read_text(encoding="utf-8").splitlines()) if "id" in row}
    start = keys.index(NEW_TEXT)
    assert [(e["start"], e["end"], e["quote"]) for e in rows["t3"]["evidence"]] == [(start, start + len(NEW_TEXT), NEW_TEXT)]
    evalset = load_evalset(moved, load_corpus(corpus))  # nothing stale any more
    assert evalset.meta["gold"] == {"moved": 0, "unverifiable": 0, "moves": []}
