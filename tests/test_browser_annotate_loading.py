"""Keys pressed while the next question's passages are still loading act on nothing, in Debian's
Chromium: the page held the previous question's passages until the new ones arrived, so ``x``,
``r`` or ``Shift+X`` in that gap saved one of them as evidence of the new question. The candidates
request of the second question is held back by Playwright's routing, the keys are pressed, then the
request goes through: the second question has no evidence, the first keeps what it had.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import start_page, stop_page

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

DEMO = Path(__file__).resolve().parents[1] / "ragexp" / "data" / "datasets" / "demo"
TIMEOUT_MS = 120_000

pytestmark = BROWSER_MARKS

STATE = "() => { const s = window.ragexpAnnotate.state; return {current: s.current, entries: s.entries}; }"


def test_keys_while_the_next_questions_passages_load_judge_nothing(tmp_path):
    demo = [json.loads(line) for line in (DEMO / "evalset.jsonl").read_text().splitlines()[1:3]]
    rows = tmp_path / "questions.jsonl"
    rows.write_text("".join(json.dumps({"query": d["query"], "source": "log"}) + "\n" for d in demo))
    args = ["evalset", "annotate", str(tmp_path / "evalset.jsonl"), "--corpus", str(DEMO / "corpus"),
            "--queries", str(rows), "--pipelines", "bm25", "--pool-depth", "4", "--port", str(free_port())]
    server, url = start_page(tmp_path, args)
    held = []
    try:
        with launched() as browser:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            page.wait_for_function("() => document.querySelectorAll('#candidates .passage').length > 0")
            first = page.evaluate(STATE)["current"]
            page.keyboard.press("x")  # one judged negative on the first question, saved
            page.wait_for_function("(id) => window.ragexpAnnotate.state.entries.find((e) => e.id === id)"
                                   ".evidence.length === 1", arg=first)
            page.route("**/candidates", lambda route: held.append(route))
            page.keyboard.press("s")  # skip: the second question opens, its passages held back
            page.wait_for_function("(id) => window.ragexpAnnotate.state.current !== id", arg=first)
            page.wait_for_timeout(300)
            assert held, "the second question's candidates were not asked for"
            for key in ("x", "r", "j", "x", "Shift+X"):
                page.keyboard.press(key)
            page.wait_for_timeout(500)  # any save the keys started would be under way
            held[0].continue_()
            page.unroute("**/candidates")
            page.wait_for_function("() => window.ragexpAnnotate.state.candidates.length > 0")
            second = page.evaluate(STATE)["current"]
            page.reload()  # what the server holds, not only what the page shows
            page.wait_for_function("() => window.ragexpAnnotate.state.entries.length > 0")
            by_id = {e["id"]: e for e in page.evaluate(STATE)["entries"]}
            assert by_id[second]["evidence"] == [], "a key in the loading gap judged the previous question's passage"
            assert len(by_id[first]["evidence"]) == 1
    finally:
        stop_page(server)
