"""Adjudication without anchoring, walked in Debian's Chromium (issue #41's Must show).

Two annotators' files of the same four questions on the tiny corpus, with three planted
disagreements (answerability; a passage one judged relevant and the other not; two different
spans), and one question both answered alike. ``ragexp evalset agreement --queue --adjudicator
carol`` builds the set to adjudicate; on the page each disputed passage shows both verdicts
side by side (badges and its two coloured borders) and the adjudicator's own as "not judged yet":
no verdict is preselected, no passage is drawn as evidence, and ``Ctrl+Enter`` is refused until
every disputed passage and the disputed answerability are decided. Carol decides each as planned;
the adjudicated file then equals the intended eval set field by field, and its header names her
and both sources.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.helpers.annotator_pair import write
from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.cli import ragexp
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import settled_save_state, start_page, stop_page
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS
TIMEOUT_MS = 120_000


def span(doc_id: str, quote: str, grade: int = 1) -> dict:
    start = TINY_DOCS[doc_id].index(quote)
    return {"doc_id": doc_id, "start": start, "end": start + len(quote), "quote": quote} | ({"grade": grade} if grade != 1 else {})


RETRIED = span("webhooks", "Failed deliveries are retried with exponential backoff for 24 hours.")
MONTHLY = "Monthly plans are not refunded."
SEARCH = span("limits", "The search endpoint allows 30 requests per minute per key.")
CREATE = "Create the new key, deploy it, then revoke the old key: there is no downtime."
TWO_KEYS = "You can have two active keys at once."


def item(item_id: str, query: str, evidence: list[dict], **fields) -> dict:
    return {"id": item_id, "query": query, "evidence": evidence} | fields


ALICE = [
    item("a1", "How long are webhooks retried?", [RETRIED], gold_answer="24 hours", key_facts=["24 hours"]),
    item("a2", "Is a monthly plan refunded?", [span("refunds", MONTHLY)], gold_answer="No."),
    item("a3", "What is the search rate limit?", [SEARCH, span("refunds", MONTHLY, 0)], gold_answer="30 requests per minute"),
    item("a4", "How do I rotate a key without downtime?", [span("keys", CREATE)], gold_answer="Create, deploy, revoke."),
]
BOB = [
    ALICE[0],
    item("a2", "Is a monthly plan refunded?", [span("refunds", MONTHLY, 0)], answerable=False),  # 1: answerability
    item("a3", "What is the search rate limit?", [SEARCH, span("refunds", MONTHLY)], gold_answer="30 requests per minute"),  # 2
    item("a4", "How do I rotate a key without downtime?", [span("keys", TWO_KEYS)], gold_answer="Have two keys active."),  # 3
]
#: What carol decides: a2 unanswerable (bob), a3 the refunds passage not relevant (alice), a4 both spans relevant and bob's answer.
INTENDED = {
    "a1": ALICE[0],
    "a2": item("a2", "Is a monthly plan refunded?", [span("refunds", MONTHLY, 0)], answerable=False),
    "a3": item("a3", "What is the search rate limit?", [SEARCH, span("refunds", MONTHLY, 0)], gold_answer="30 requests per minute"),
    "a4": item("a4", "How do I rotate a key without downtime?", [span("keys", CREATE), span("keys", TWO_KEYS)],
               gold_answer="Have two keys active."),
}


def comparable(obj: dict) -> dict:
    """An eval-set line without when it was added, its evidence in a fixed order."""
    return {k: v for k, v in obj.items() if k not in ("added", "annotator")} | {
        "evidence": sorted(obj["evidence"], key=lambda e: (e["doc_id"], e["start"]))}


def test_two_annotators_with_three_planted_disagreements_adjudicate_to_the_intended_set(tmp_path):
    corpus, _ = write_tiny_dataset(tmp_path)
    alice, bob = write(tmp_path / "alice.jsonl", ALICE), write(tmp_path / "bob.jsonl", BOB)
    queue = tmp_path / "adjudicated.jsonl"
    printed = ragexp(tmp_path, "evalset", "agreement", alice, bob, "--corpus", str(corpus), "--queue", str(queue),
                     "--adjudicator", "carol", "--no-log").stdout
    assert "disagreements       3 items" in printed
    assert "1 items both gave alike (settled), 3 disagreements and 0 smaller differences queued" in printed
    server, url = start_page(tmp_path, ["evalset", "annotate", str(queue), "--corpus", str(corpus), "--port", str(free_port()),
                                        "--pipelines", "bm25"])
    seen = []  # each disputed passage as first shown: (question, badges, border classes, drawn as evidence)

    def shown_units(page, query: str) -> None:
        sync_api.expect(page.locator("#query")).to_have_text(query)
        page.wait_for_function("() => { const s = window.ragexpAnnotate.state; return s.candidatesOf === s.current; }")
        for box in page.locator("#candidates .passage").all():
            seen.append((query, [b.inner_text() for b in box.locator(".verdict, .mine").all()], box.get_attribute("class"),
                         box.locator("mark.pos").count()))

    def saved(page) -> None:
        assert settled_save_state(page, TIMEOUT_MS) == "saved"

    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            sync_api.expect(page.locator("#queue li .badge")).to_have_text(["done", "review 1", "review 1", "review 2"])

            # 1: answerability. Nothing preselected: neither the flag nor the passage
            shown_units(page, "Is a monthly plan refunded?")
            assert not page.locator("#unanswerable").is_checked()
            rows = page.locator("#adjudication tr").all_inner_texts()
            assert any(r.startswith("answerable") and "unanswerable" in r for r in rows), rows
            page.keyboard.press("Control+Enter")  # refused: nothing decided yet
            sync_api.expect(page.locator("#page-message")).to_have_text(
                "1 disputed passage(s) not judged yet: r relevant, x not relevant, Shift+X the rest not relevant")
            page.keyboard.press("x")
            saved(page)
            page.keyboard.press("Control+Enter")  # still refused: answerable or not is the adjudicator's call
            sync_api.expect(page.locator("#page-message")).to_contain_text("answerability is disputed")
            page.keyboard.press("u")
            saved(page)
            page.keyboard.press("Control+Enter")

            # 2: a passage alice judged not relevant and bob relevant
            shown_units(page, "What is the search rate limit?")
            page.keyboard.press("x")
            saved(page)
            page.keyboard.press("Control+Enter")

            # 3: two different spans; both relevant, bob's answer taken
            shown_units(page, "How do I rotate a key without downtime?")
            page.keyboard.press("r")
            saved(page)
            page.keyboard.press("r")
            saved(page)
            page.locator("#adjudication button[data-take=gold_answer][data-side='1']").click()
            saved(page)
            page.keyboard.press("Control+Enter")
            saved(page)
            sync_api.expect(page.locator("#queue li .badge")).to_have_text(["done"] * 4)
    finally:
        stop_page(server)

    # no verdict preselected: each disputed passage opened with both verdicts shown and none taken
    assert seen == [
        ("Is a monthly plan refunded?", ["alice: relevant", "bob: not relevant", "yours: not judged yet"],
         "passage adjudicated first-relevant second-not-relevant focused", 0),
        ("What is the search rate limit?", ["alice: not relevant", "bob: relevant", "yours: not judged yet"],
         "passage adjudicated first-not-relevant second-relevant focused", 0),
        ("How do I rotate a key without downtime?", ["alice: relevant", "bob: not judged", "yours: not judged yet"],
         "passage adjudicated first-relevant second-not-judged focused", 0),
        ("How do I rotate a key without downtime?", ["alice: not judged", "bob: relevant", "yours: not judged yet"],
         "passage adjudicated first-not-judged second-relevant", 0),
    ]  # a4's units in the queue's order: alice's span, then bob's
    header, *lines = map(json.loads, queue.read_text(encoding="utf-8").splitlines())
    assert {obj["id"]: comparable(obj) for obj in lines} == {i: comparable(x) for i, x in INTENDED.items()}
    assert [obj.get("annotator") for obj in lines] == [None, "carol", "carol", "carol"]  # a1 settled, untouched
    assert header["name"] == "support-adjudicated"
    assert header["adjudication"] == {"adjudicator": "carol", "sources": [
        {"file": "alice.jsonl", "sha256": hashlib.sha256(Path(alice).read_bytes()).hexdigest()},
        {"file": "bob.jsonl", "sha256": hashlib.sha256(Path(bob).read_bytes()).hexdigest()}]}
    assert ragexp(tmp_path, "evalset", "lint", str(queue), "--corpus", str(corpus), check=False).returncode == 0
