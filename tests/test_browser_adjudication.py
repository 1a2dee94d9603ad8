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


WIDE = span("keys", f"{TWO_KEYS} {CREATE}")
NARROW = span("keys", CREATE)
#: Nested spans (alice the whole rotation paragraph, bob one sentence inside it) and an item whose only
#: difference is the gold answer.
NESTED_ALICE = [item("n1", "How do I rotate a key without downtime?", [WIDE], gold_answer="Create, deploy, revoke."),
                item("g1", "How long are webhooks retried?", [RETRIED], gold_answer="24 hours")]
NESTED_BOB = [item("n1", "How do I rotate a key without downtime?", [NARROW], gold_answer="Create, deploy, revoke."),
              item("g1", "How long are webhooks retried?", [RETRIED], gold_answer="For 24 hours, with exponential backoff.")]
#: What dave decides: the narrow sentence relevant, the wide passage around it not; bob's answer.
NESTED_INTENDED = {
    "n1": item("n1", "How do I rotate a key without downtime?", [span("keys", f"{TWO_KEYS} {CREATE}", 0), NARROW],
               gold_answer="Create, deploy, revoke."),
    "g1": item("g1", "How long are webhooks retried?", [RETRIED], gold_answer="For 24 hours, with exponential backoff."),
}


def put_reviewed(url: str, item_id: str) -> tuple[int, str]:
    """Mark an entry reviewed straight through the API, as a page that skipped its own check would."""
    import urllib.error
    import urllib.request

    body = json.dumps({"changes": {"reviewed": True}, "before": {"reviewed": False}}).encode()
    request = urllib.request.Request(f"{url.rstrip('/')}/api/entries/{item_id}", data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_nested_spans_and_a_differing_gold_answer_each_need_an_explicit_decision(tmp_path):
    corpus, _ = write_tiny_dataset(tmp_path)
    alice, bob = write(tmp_path / "alice.jsonl", NESTED_ALICE), write(tmp_path / "bob.jsonl", NESTED_BOB)
    queue = tmp_path / "adjudicated.jsonl"
    printed = ragexp(tmp_path, "evalset", "agreement", alice, bob, "--corpus", str(corpus), "--queue", str(queue),
                     "--adjudicator", "dave", "--no-log").stdout
    assert "0 items both gave alike (settled)" in printed
    server, url = start_page(tmp_path, ["evalset", "annotate", str(queue), "--corpus", str(corpus), "--port", str(free_port()),
                                        "--pipelines", "bm25"])

    def badges(page) -> list[list[str]]:
        return [[b.inner_text() for b in box.locator(".verdict, .mine").all()] for box in page.locator("#candidates .passage").all()]

    def saved(page) -> None:
        assert settled_save_state(page, TIMEOUT_MS) == "saved"

    def refused(page, message: str) -> None:
        page.keyboard.press("Control+Enter")
        sync_api.expect(page.locator("#page-message")).to_have_text(message)

    try:
        # the server refuses to settle an undecided item whatever the page does
        assert put_reviewed(url, "g1")[0] == 422
        status, text = put_reviewed(url, "n1")
        assert status == 422 and "2 disputed passage(s) not judged yet" in text, text
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            sync_api.expect(page.locator("#queue li .badge")).to_have_text(["review 2", "review"])
            sync_api.expect(page.locator("#query")).to_have_text("How do I rotate a key without downtime?")
            page.wait_for_function("() => { const s = window.ragexpAnnotate.state; return s.candidatesOf === s.current; }")
            sync_api.expect(page.locator("#adjudication .adjudicator")).to_contain_text("adjudicating as dave")
            # each side's verdict says how its span lies: bob's sentence within alice's passage, hers around his
            assert badges(page) == [["alice: relevant", "bob: relevant, a span within", "yours: not judged yet"],
                                    ["alice: relevant, a span around it", "bob: relevant", "yours: not judged yet"]]
            page.keyboard.press("j")  # the narrow sentence
            page.keyboard.press("r")
            saved(page)
            # the wide passage around it is not decided by that: the page says so and refuses
            assert badges(page)[0][2] == "yours: not judged yet" and badges(page)[1][2] == "yours: relevant"
            sync_api.expect(page.locator("#queue li .badge").first).to_have_text("review 1")
            refused(page, "1 disputed passage(s) not judged yet: r relevant, x not relevant, Shift+X the rest not relevant")
            page.keyboard.press("k")
            page.keyboard.press("x")  # the wide passage: not relevant (only the sentence answers it)
            saved(page)
            assert badges(page)[0][2] == "yours: not relevant"
            page.keyboard.press("Control+Enter")

            # only the gold answer differs: no passage to judge, and still no settling without a choice
            sync_api.expect(page.locator("#query")).to_have_text("How long are webhooks retried?")
            rows = page.locator("#adjudication tr").all_inner_texts()
            assert any(r.startswith("gold answer") for r in rows), rows
            refused(page, "the gold answers differ: take one (or type your own)")
            page.locator("#adjudication button[data-take=gold_answer][data-side='1']").click()
            saved(page)
            page.keyboard.press("Control+Enter")
            saved(page)
            sync_api.expect(page.locator("#queue li .badge")).to_have_text(["done"] * 2)
    finally:
        stop_page(server)

    header, *lines = map(json.loads, queue.read_text(encoding="utf-8").splitlines())
    assert {obj["id"]: comparable(obj) for obj in lines} == {i: comparable(x) for i, x in NESTED_INTENDED.items()}
    assert [obj.get("annotator") for obj in lines] == ["dave", "dave"]
    assert header["adjudication"]["adjudicator"] == "dave"
    assert ragexp(tmp_path, "evalset", "lint", str(queue), "--corpus", str(corpus), check=False).returncode == 0
