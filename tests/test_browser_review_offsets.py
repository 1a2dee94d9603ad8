"""The review page highlights the context sentence the judge relied on at the server's offsets,
in Debian's Chromium, also after emoji: the server counts code points, JavaScript UTF-16 units, so
the highlight used to slide one character left per emoji before it.

The page, its static files and ``GET /api/review`` (a real :class:`ReviewSession`'s state) are
served through Playwright's request routing: no server process, no run to log first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragexp.judge_review.sample import ReviewClaim
from ragexp.judge_review.session import ReviewSession
from ragexp.judging.calibration.labels import LabelledClaim
from ragexp.web.app import STATIC_DIR
from tests.helpers.chromium import BROWSER_MARKS, launched

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS

CONTEXT = "🎉🎉 Party time 🎉! The cake is served at noon sharp. Drinks are free."
RELIED_ON = "The cake is served at noon sharp."


def review_state(tmp_path: Path) -> dict:
    start = CONTEXT.index(RELIED_ON)  # code points, as the server computes every offset
    row = LabelledClaim(id="RUN/q1#claim_0", context=CONTEXT, claim="The cake is served at noon.", judge_label="supported")
    claim = ReviewClaim(row, "When is the cake served?", "The cake is served at noon.", [start, start + len(RELIED_ON)], "judge")
    session = ReviewSession(run_id="RUN", run_name="bm25", claims=[claim], labels_path=tmp_path / "labels.csv", seed=0,
                            total_claims=1, log=lambda *args: None)
    return session.state()


def test_the_highlight_after_emoji_is_the_sentence_the_judge_relied_on(tmp_path):
    state = review_state(tmp_path)
    def serve(route):
        path = "/" + route.request.url.split("/", 3)[3]
        if path == "/api/review":
            return route.fulfill(status=200, content_type="application/json", body=json.dumps(state))
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            kind = "text/css" if name.endswith(".css") else "text/javascript"
            return route.fulfill(status=200, content_type=kind, body=(STATIC_DIR / name).read_text(encoding="utf-8"))
        if path == "/":
            return route.fulfill(status=200, content_type="text/html", body=(STATIC_DIR / "review.html").read_text(encoding="utf-8"))
        return route.fulfill(status=404, body="")

    with launched() as browser:
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.route("http://127.0.0.1:9/**", serve)
        page.goto("http://127.0.0.1:9/")
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator("#context mark").text_content() == RELIED_ON
        assert page.locator("#context").text_content() == CONTEXT
