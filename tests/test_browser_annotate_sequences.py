"""Every keystroke lands where the annotator meant it, in Debian's Chromium (issue #41).

``test_the_documented_key_sequences_save_each_item_kind_field_by_field`` types the key sequence
docs/annotation.md documents for each kind of item, on three demo questions queued in that order:

- answerable (q077): the answer marked with the mouse, three candidates judged not relevant
  (``x``; ``j`` passes over the answer's passage), ``a`` + the gold answer + ``Enter``, ``f`` + three
  key facts separated by ``Enter`` + ``Esc``, ``Ctrl+Enter``;
- unanswerable (q132): one candidate ``x``, ``u``, ``a`` + what a good reply says + ``Enter``,
  ``Ctrl+Enter``;
- multi-span (q079): two spans marked with the mouse in two passages, ``Shift+X`` for the rest,
  ``a`` + the answer + ``Enter``, ``Ctrl+Enter``;

and asserts the saved eval set field by field. On the page before #41, ``Enter`` in the gold answer
typed a line break and the ``f`` that followed typed the key facts into the gold answer.

``test_a_drag_is_held_escape_keeps_the_search_and_the_first_question_shows_at_once`` starts cold
(a fresh stage cache, the three default pipelines over the demo corpus): the first question's
candidates must show within :data:`FIRST_QUESTION_S` of opening the page (timed here, with the
pipelines still being built: the lexical one answers first), and the pool then grows in place
(what was shown keeps its order). Escape in the search box leaves it with its text kept; a drag
made while search results arrive (held back by the test until the mouse is down) is saved; a
selection across two passages is refused with a message, not dropped silently.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import (
    drag_select,
    settled_save_state,
    start_page,
    stop_page,
    text_box,
)

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS
REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "ragexp" / "data" / "datasets" / "demo"
TIMEOUT_MS = 240_000
#: The issue's bound on a cold start: the first question's candidates within 3 s of opening the page.
FIRST_QUESTION_S = 3.0

ANSWERABLE = {"id": "q077", "span": "Webhooks are retried with exponential backoff for 24 hours.",
              "answer": "Deliveries are retried for 24 hours and then marked failed; events can be replayed for 30 days.",
              "facts": ["24 hours", "marked failed", "30 days"]}
UNANSWERABLE = {"id": "q132", "reply": "The documentation does not mention a GraphQL API."}
MULTI_SPAN = {"id": "q079", "spans": ["One day after the roll. This is the default.",
                                      "One hour before the previous secret expires, Relaywave sends an `api_key.expiring` webhook event"],
              "answer": "24 hours by default; one hour before expiry an api_key.expiring event is sent."}


def demo_items() -> dict[str, dict]:
    return {obj["id"]: obj for obj in map(json.loads, (DEMO / "evalset.jsonl").read_text().splitlines()[1:])}


def saved(page) -> None:
    state = settled_save_state(page, TIMEOUT_MS)
    assert state == "saved", page.locator("#save-status").inner_text()


def shown(page) -> list[dict]:
    """The open question's candidates once they are on the page."""
    page.wait_for_function("() => { const s = window.ragexpAnnotate.state; return s.candidatesOf === s.current && "
                           "document.querySelectorAll('#candidates .passage').length > 0; }")
    return page.evaluate("() => window.ragexpAnnotate.state.candidates")


def text_of(page, element_id: str) -> str | None:
    """An element's text now (``None`` when the page has no such element)."""
    return page.evaluate("(id) => document.getElementById(id)?.textContent ?? null", element_id)


def passage_with(candidates: list[dict], text: str) -> str:
    index = next(i for i, p in enumerate(candidates) if text in p["text"])
    return f'#candidates .passage[data-index="{index}"] .passage-text'


def judge_negatives(page, n: int, keep_out: list[str]) -> None:
    """``x`` on the focused passage until ``n`` are judged not relevant, ``j`` past the ones holding ``keep_out``."""
    while page.evaluate("() => { const s = window.ragexpAnnotate.state; const e = s.entries.find((x) => x.id === s.current);"
                        " return e.evidence.filter((x) => (x.grade ?? 1) === 0).length; }") < n:
        focused = page.evaluate("() => { const s = window.ragexpAnnotate.state; return s.candidates[s.focus].text; }")
        page.keyboard.press("j" if any(text in focused for text in keep_out) else "x")
        saved(page)


def test_the_documented_key_sequences_save_each_item_kind_field_by_field(tmp_path):
    demo = demo_items()
    rows = tmp_path / "questions.jsonl"
    order = [ANSWERABLE["id"], UNANSWERABLE["id"], MULTI_SPAN["id"]]
    rows.write_text("".join(json.dumps({"query": demo[i]["query"], "source": "log"}) + "\n" for i in order))
    evalset = tmp_path / "evalset.jsonl"
    server, url = start_page(tmp_path, ["evalset", "annotate", str(evalset), "--corpus", str(DEMO / "corpus"), "--queries",
                                        str(rows), "--pipelines", "bm25", "--pool-depth", "6", "--port", str(free_port()),
                                        "--annotator", "ana"])
    seen: dict[str, str] = {}  # what the page said along the way, checked after the file
    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)

            # answerable: answer + key facts + 3 negatives
            candidates = shown(page)
            drag_select(page, passage_with(candidates, ANSWERABLE["span"]), ANSWERABLE["span"])
            saved(page)
            judge_negatives(page, 3, [ANSWERABLE["span"]])
            page.keyboard.press("a")
            seen["typing"] = text_of(page, "typing")
            page.keyboard.type(ANSWERABLE["answer"])
            page.keyboard.press("Enter")  # leaves the one-line answer field
            page.keyboard.press("f")
            for i, fact in enumerate(ANSWERABLE["facts"]):
                page.keyboard.type(fact)
                page.keyboard.press("Enter" if i + 1 < len(ANSWERABLE["facts"]) else "Escape")
            seen["after escape"] = page.evaluate("document.activeElement.id")
            page.keyboard.press("Control+Enter")
            page.wait_for_function("q => document.getElementById('query').textContent === q", arg=demo[UNANSWERABLE["id"]]["query"])
            saved(page)

            # unanswerable: one negative, u, the reply a good answer gives
            shown(page)
            page.keyboard.press("x")
            saved(page)
            page.keyboard.press("u")
            saved(page)
            page.keyboard.press("a")
            page.keyboard.type(UNANSWERABLE["reply"])
            page.keyboard.press("Enter")
            page.keyboard.press("f")  # no key facts for an unanswerable question: said, and nothing focused
            seen["facts refused"] = text_of(page, "page-message")
            seen["after f"] = page.evaluate("document.activeElement.id")
            page.keyboard.press("Control+Enter")
            page.wait_for_function("q => document.getElementById('query').textContent === q", arg=demo[MULTI_SPAN["id"]]["query"])
            saved(page)

            # multi-span: two spans in two passages, the rest not relevant, the answer
            candidates = shown(page)
            assert passage_with(candidates, MULTI_SPAN["spans"][0]) != passage_with(candidates, MULTI_SPAN["spans"][1])
            for span in MULTI_SPAN["spans"]:
                drag_select(page, passage_with(candidates, span), span)
                saved(page)
            seen["multi rest"] = sum(not any(span in p["text"] for span in MULTI_SPAN["spans"]) for p in candidates)
            page.keyboard.press("Shift+X")
            saved(page)
            page.keyboard.press("a")
            page.keyboard.type(MULTI_SPAN["answer"])
            page.keyboard.press("Enter")
            page.keyboard.press("Control+Enter")
            saved(page)
            page.wait_for_function("() => [...document.querySelectorAll('#queue .badge')].every((b) => b.textContent === 'done')")
    finally:
        stop_page(server)

    written = {obj["id"]: obj for obj in map(json.loads, evalset.read_text(encoding="utf-8").splitlines()[1:])}
    ids = {demo[i]["query"]: i for i in order}
    items = {ids[obj["query"]]: obj for obj in written.values()}
    assert sorted(items) == sorted(order)

    answerable = items[ANSWERABLE["id"]]
    assert answerable["gold_answer"] == ANSWERABLE["answer"]  # not the facts after it
    assert answerable["key_facts"] == ANSWERABLE["facts"]
    assert answerable.get("answerable", True) is True and answerable["annotator"] == "ana" and answerable["source"] == "log"
    assert [e["quote"] for e in answerable["evidence"] if e.get("grade", 1) == 1] == [ANSWERABLE["span"]]
    assert sum(e.get("grade", 1) == 0 for e in answerable["evidence"]) == 3

    unanswerable = items[UNANSWERABLE["id"]]
    assert unanswerable["answerable"] is False and unanswerable["gold_answer"] == UNANSWERABLE["reply"]
    assert "key_facts" not in unanswerable
    assert [e.get("grade", 1) for e in unanswerable["evidence"]] == [0]

    multi = items[MULTI_SPAN["id"]]
    assert multi["gold_answer"] == MULTI_SPAN["answer"] and "key_facts" not in multi
    assert sorted(e["quote"] for e in multi["evidence"] if e.get("grade", 1) == 1) == sorted(MULTI_SPAN["spans"])
    assert sum(e.get("grade", 1) == 0 for e in multi["evidence"]) == seen["multi rest"] > 0  # Shift+X: all the others

    assert seen["typing"] == "Typing into the gold answer: keys are typed here; Enter or Esc leaves."
    assert seen["after escape"] == "" and seen["after f"] == ""  # the body: the next key is a command
    assert seen["facts refused"] == "this question is unanswerable: no key facts (u to change it)"


def test_a_drag_is_held_escape_keeps_the_search_and_the_first_question_shows_at_once(tmp_path):
    demo = demo_items()
    rows = tmp_path / "questions.jsonl"
    rows.write_text(json.dumps({"query": demo["q077"]["query"], "source": "log"}) + "\n")
    evalset = tmp_path / "evalset.jsonl"
    started = time.monotonic()
    server, url = start_page(tmp_path, ["evalset", "annotate", str(evalset), "--corpus", str(DEMO / "corpus"), "--queries",
                                        str(rows), "--pool-depth", "6", "--port", str(free_port())])  # default pipelines, fresh stage cache
    to_url = time.monotonic() - started
    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            opened = time.monotonic()
            page.goto(url)
            first = shown(page)
            first_question_s = time.monotonic() - opened
            pending = page.evaluate("() => window.ragexpAnnotate.state.pending")
            note = page.locator("#candidates-note").inner_text()
            print(f"cold start: URL after {to_url:.1f} s, first candidates {first_question_s:.2f} s after opening the page; "
                  f"still pooling {pending}")
            assert first_question_s <= FIRST_QUESTION_S, (first_question_s, pending)
            assert pending and "still pooling" in note  # shown before the dense pipelines were built

            # Escape leaves the search box and keeps its text; the next key is a command again
            page.keyboard.press("/")
            page.keyboard.type("replay events")
            page.keyboard.press("Escape")
            assert page.locator("#search").input_value() == "replay events"
            assert page.evaluate("document.activeElement.id") == ""
            focus = page.evaluate("() => window.ragexpAnnotate.state.focus")
            page.keyboard.press("j")
            assert page.evaluate("() => window.ragexpAnnotate.state.focus") == focus + 1

            # a selection across two passages is refused, and says so
            a = text_box(page, '#candidates .passage[data-index="0"] .passage-text', first[0]["text"][:12])
            b = page.evaluate("() => { const r = document.querySelectorAll('#candidates .passage-text')[1].getBoundingClientRect();"
                              " return {x: r.left + 40, y: r.top + 8}; }")  # the next passage, below the first (no scroll)
            page.mouse.move(a["x1"], a["y1"])
            page.mouse.down()
            page.mouse.move(b["x"], b["y"], steps=5)
            page.mouse.up()
            assert page.locator("#page-message").inner_text() == \
                "not marked: a selection must lie within one passage (select again inside it)"

            # a drag made while search results arrive is held, then saved
            held = []
            page.route("**/api/search?*", lambda route: held.append(route))  # the answer waits until the mouse is down
            page.locator("#search").focus()
            page.keyboard.press("Enter")
            page.wait_for_function("() => document.activeElement.id === ''")
            span = ANSWERABLE["span"]
            box = text_box(page, passage_with(shown(page), span), span)
            page.mouse.move(box["x1"], box["y1"])
            page.mouse.down()
            page.mouse.move((box["x1"] + box["x2"]) / 2, box["y2"], steps=3)
            assert len(held) == 1
            held[0].continue_()
            page.wait_for_function("() => window.ragexpAnnotate.state.searchHits !== null")  # arrived mid-drag
            page.mouse.move(box["x2"], box["y2"], steps=3)
            page.mouse.up()
            saved(page)
            page.wait_for_selector("#search-results .passage")  # drawn once the mouse was released
            evidence = page.evaluate("() => { const s = window.ragexpAnnotate.state; return s.entries.find((e) => e.id === s.current).evidence; }")
            assert [e["quote"] for e in evidence] == [span]

            # the pool grows in place: what was shown first keeps its order among the rest
            page.wait_for_function("() => window.ragexpAnnotate.state.pending.length === 0", timeout=900_000)
            grown = [p["unit_id"] for p in page.evaluate("() => window.ragexpAnnotate.state.candidates")]
            before = [p["unit_id"] for p in first]
            assert len(grown) > len(before) and [u for u in grown if u in before] == before
    finally:
        stop_page(server)
