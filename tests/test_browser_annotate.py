"""Building an eval set in the browser, end to end, in Debian's Chromium.

A 200-line query log (exact duplicates, case and spacing variants, one query holding an e-mail
address) goes through ``ragexp evalset queries --sample 10``; ``ragexp evalset annotate`` serves the
page on 127.0.0.1 over the demo corpus; the test then annotates as a person would: three questions
by selecting the evidence with the mouse in the pooled candidates (one candidate also judged "not
relevant"), one through the corpus search, one unanswerable. Between the third and the fourth the
server is killed with SIGKILL while the page keeps typing; it is restarted on the same port, the
page's kept saves go through without a conflict, and nothing is lost; an answer typed just before a
reload is kept too, and Escape leaves a field without losing what it holds (two pages on one file and a
corpus changed under an open page: tests/test_browser_annotate_conflicts.py). The file then lints clean and a run uses it
(logging ``judged_at_5``). Clicks, key presses and mouse drags are counted per item (docs/annotation.md).

Screenshots go to ``test-artifacts/``; ``RAGEXP_UPDATE_SCREENSHOT=1`` copies them to ``docs/images/``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.chromium import BROWSER_MARKS, launched
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import free_port
from tests.helpers.page_server import (
    drag_select,
    settled_save_state,
    start_page,
    stop_page,
)

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "ragexp" / "data" / "datasets" / "demo"
ARTIFACTS = REPO / "test-artifacts"
DOCS_IMAGES = REPO / "docs" / "images"
UPDATE_SCREENSHOTS = os.environ.get("RAGEXP_UPDATE_SCREENSHOT") == "1"
TIMEOUT_MS = 240_000
#: Demo questions put in the log: nine answerable, one the corpus does not answer (q132).
LOG_IDS = ("q001", "q003", "q005", "q010", "q015", "q020", "q025", "q030", "q040", "q132")
EMAIL_QUERY = "please email me at jane.doe@example.com about my refund"

pytestmark = BROWSER_MARKS


def demo_items() -> dict[str, dict]:
    lines = (DEMO / "evalset.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    return {obj["id"]: obj for obj in map(json.loads, lines)}


def write_log(path: Path, items: dict[str, dict]) -> None:
    """200 lines: each question 10-30 times in varying case and spacing, plus the e-mail query."""
    lines, i = [], 0
    while len(lines) < 199:
        query = items[LOG_IDS[i % len(LOG_IDS)]]["query"]
        lines.append(query.lower() if i % 3 == 1 else f"  {query}" if i % 3 == 2 else query)
        i += 1
    lines.insert(57, EMAIL_QUERY)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class Actions:
    """The page actions a person makes, counted per item: clicks, key presses, mouse drags; typed
    characters are counted apart."""

    def __init__(self, page) -> None:
        self.page = page
        self.counts: dict[str, Counter] = {}
        self.item = "setup"

    def count(self, kind: str, n: int = 1) -> None:
        self.counts.setdefault(self.item, Counter())[kind] += n

    def click(self, locator) -> None:
        locator.click()
        self.count("clicks")

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)
        self.count("keys")

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)
        self.count("typed", len(text))

    def select(self, container_selector: str, text: str) -> None:
        """Drag the mouse over the first occurrence of ``text`` inside the element."""
        drag_select(self.page, container_selector, text)
        self.count("drags")


def short_quote(quote: str, limit: int = 70) -> str:
    """The first sentence-ish part of a quote (a person selects the words that answer)."""
    cut = quote[:limit]
    return cut[: cut.rfind(" ")] if len(quote) > limit else quote


def saved(page) -> None:
    """Wait until the page's saves settle (its own save state): "saved" passes, a conflict or an
    error fails at once with what the page says."""
    try:
        state = settled_save_state(page, TIMEOUT_MS)
    except sync_api.TimeoutError:
        state = None
    if state != "saved":
        page.screenshot(path=str(ARTIFACTS / "annotate-not-saved.png"))
        raise AssertionError(f"not saved: {page.locator('#save-status').inner_text()!r}")


def settled_pool(page, candidates_url: str, timeout_s: float = 600) -> list[dict]:
    """The question's whole pool: asked again until no pipeline is still being built (the page
    shows BM25's candidates first and the dense ones as they come, ragexp.annotation.pool)."""
    deadline = time.monotonic() + timeout_s
    while True:
        data = page.request.get(candidates_url, timeout=timeout_s * 1000).json()
        if not data.get("pending") or time.monotonic() > deadline:
            assert not data.get("pending"), data["pending"]
            return data["candidates"]
        page.wait_for_timeout(1000)


def test_annotate_a_log_in_the_browser_kill_the_server_and_lose_nothing(tmp_path):
    items = demo_items()
    by_query = {item["query"]: item for item in items.values()}
    log = tmp_path / "search.log"
    write_log(log, items)
    ENV["RAGEXP_CACHE_DIR"] = str(tmp_path / "cache")
    imported = ragexp(tmp_path, "evalset", "queries", str(log), "--sample", "10", "--out", "candidates.jsonl")
    assert "left out 1 queries holding personal data or secrets: 1 e-mail address" in imported.stdout, imported.stdout
    assert "189 merged, 10 distinct queries" in imported.stdout
    candidates = [json.loads(line) for line in (tmp_path / "candidates.jsonl").read_text().splitlines()]
    assert len(candidates) == 10 and sum(c["frequency"] for c in candidates) == 199
    assert all("@" not in c["query"] for c in candidates)

    port = free_port()
    corpus = str(DEMO / "corpus")
    args = [str(tmp_path / "evalset.jsonl"), "--corpus", corpus, "--queries", "candidates.jsonl", "--port", str(port)]
    server, url = start_page(tmp_path, ["evalset", "annotate", *args])
    ARTIFACTS.mkdir(exist_ok=True)
    shots = []
    try:
        with launched() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            act = Actions(page)
            page.goto(url)
            page.wait_for_selector("#candidates .passage")

            def current_item() -> dict:
                return by_query[page.locator("#query").inner_text().strip()]

            def go_to(item_id: str) -> None:
                query = items[item_id]["query"]
                act.click(page.locator("#queue li", has_text=query))
                page.wait_for_function("q => document.getElementById('query').textContent === q", arg=query)
                page.wait_for_selector("#candidates .passage")

            queued = [by_query[c["query"]]["id"] for c in candidates]
            pool_texts = {}
            answerable = [i for i in queued if items[i].get("answerable", True)]
            by_mouse, searched = [], None
            for item_id in answerable:  # the questions whose evidence the pool holds, in queue order
                query = items[item_id]["query"]
                entry = next(e for e in page.evaluate("() => window.ragexpAnnotate.state.entries") if e["query"] == query)
                pool = settled_pool(page, f"{url}api/entries/{entry['id']}/candidates")
                pool_texts[item_id] = pool
                quote = short_quote(items[item_id]["evidence"][0]["quote"])
                if any(quote in p["text"] for p in pool) and len(by_mouse) < 3:
                    by_mouse.append(item_id)
                elif searched is None:
                    searched = item_id
            assert len(by_mouse) == 3 and searched is not None, (by_mouse, searched)

            for n, item_id in enumerate(by_mouse):
                act.item = item_id
                go_to(item_id)
                item = items[item_id]
                quote = short_quote(item["evidence"][0]["quote"])
                index = next(i for i, p in enumerate(pool_texts[item_id]) if quote in p["text"])
                act.select(f'#candidates .passage[data-index="{index}"] .passage-text', quote)
                saved(page)
                if n == 0:  # one candidate judged not relevant, by keyboard: move focus to it, x
                    other = next(i for i, p in enumerate(pool_texts[item_id]) if p["doc_id"] != item["evidence"][0]["doc_id"])
                    for _ in range(other):
                        act.press("j")
                    act.press("x")
                    saved(page)
                    page.screenshot(path=str(ARTIFACTS / "annotate-pool.png"))
                    shots.append("annotate-pool.png")
                act.press("a")
                if n == 2:  # the server dies while the person types; the page keeps the change
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait()
                act.type(item["gold_answer"])
                act.press("Control+Enter")
                if n == 2:
                    page.wait_for_function("() => document.getElementById('save-status').dataset.state === 'offline'")
                    page.screenshot(path=str(ARTIFACTS / "annotate-offline.png"))
                    server, url_again = start_page(tmp_path, ["evalset", "annotate", *args])
                    assert url_again == url
                    saved(page)

            act.item = searched
            go_to(searched)
            item = items[searched]
            quote = short_quote(item["evidence"][0]["quote"])
            act.press("/")
            act.type(quote)
            act.press("Enter")
            page.wait_for_selector("#search-results .passage")
            act.select('#search-results .passage[data-index="0"] .passage-text', quote)
            saved(page)
            act.press("t")  # take the hinted categories, if any
            act.press("a")
            act.type(item["gold_answer"])
            page.reload()  # at once, within the typing pause before the answer is sent: it is kept
            page.locator("#queue li", has_text=item["query"]).click()  # the test's own click, not counted
            page.wait_for_function("a => document.getElementById('gold').value === a", arg=item["gold_answer"])
            saved(page)
            page.screenshot(path=str(ARTIFACTS / "annotate-search.png"))
            shots.append("annotate-search.png")
            act.press("Control+Enter")

            unanswerable = next(i for i in queued if not items[i].get("answerable", True))
            act.item = unanswerable
            go_to(unanswerable)
            act.press("u")
            act.press("a")
            act.type(items[unanswerable]["gold_answer"])
            act.press("Escape")  # leaves the field, and the next key is a shortcut again
            act.press("Control+Enter")
            saved(page)
            # The next question opens with its own (empty) fields and the focus out of them: keys act again.
            page.wait_for_function("q => document.getElementById('query').textContent !== q", arg=items[unanswerable]["query"])
            assert page.locator("#gold").input_value() == "" and page.evaluate("document.activeElement.id") != "gold"

            assert page.locator("#conflict-bar").count() == 0  # the restart caused no conflict

            page.reload()  # what the files hold now, as a restarted page sees it
            page.wait_for_selector("#queue li")
            page.screenshot(path=str(ARTIFACTS / "annotate-coverage.png"))
            shots.append("annotate-coverage.png")
    finally:
        stop_page(server)

    lines = [json.loads(line) for line in (tmp_path / "evalset.jsonl").read_text().splitlines()]
    written = {obj["query"]: obj for obj in lines[1:]}
    annotated = [*by_mouse, searched, unanswerable]
    assert sorted(written) == sorted(items[i]["query"] for i in annotated)  # all five, nothing lost
    for item_id in annotated:
        obj, item = written[items[item_id]["query"]], items[item_id]
        assert obj["gold_answer"] == item["gold_answer"] and obj["source"] == "log"
        if item_id == unanswerable:
            assert obj["answerable"] is False
            continue
        positive = [e for e in obj["evidence"] if e.get("grade", 1) >= 1]
        assert [(e["doc_id"], e["quote"]) for e in positive] == [(item["evidence"][0]["doc_id"], short_quote(item["evidence"][0]["quote"]))]
    assert any(e.get("grade") == 0 for e in written[items[by_mouse[0]]["query"]]["evidence"])  # the judged negative

    lint = ragexp(tmp_path, "evalset", "lint", "evalset.jsonl", "--corpus", corpus, check=False)
    assert lint.returncode == 0 and "error" not in lint.stdout.split("warning")[0].lower(), lint.stdout
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "dataset=evalset", f"dataset.corpus={corpus}", "dataset.evalset=evalset.jsonl",
           "retrieval=bm25", f"tracking.uri=sqlite:///{db}", "tracking.experiment=annotated", "progress=false")
    client = MlflowClient(f"sqlite:///{db}")
    run = client.search_runs([client.get_experiment_by_name("annotated").experiment_id])[0]
    assert run.data.params["n_queries"] == "4" and "retrieval/judged_at_5" in run.data.metrics

    per_item = {i: {**act.counts.get(i, Counter()), **by_hand(items[i], written[items[i]["query"]])} for i in annotated}
    (ARTIFACTS / "annotate-actions.json").write_text(json.dumps(per_item, indent=1))
    print("page actions per item:", json.dumps(per_item))
    if UPDATE_SCREENSHOTS:
        for name in shots:
            shutil.copy(ARTIFACTS / name, DOCS_IMAGES / name)


def by_hand(item: dict, written: dict) -> dict:
    """Writing the same item as a JSONL line by hand: the question and the quote copied (select,
    Ctrl+C, Ctrl+V: 3 actions each), the gold answer typed as on the page, everything else typed
    key by key (the quote form, so no offsets to count)."""
    line = {"id": item["id"], "query": item["query"]}
    positive = [e for e in written["evidence"] if e.get("grade", 1) >= 1]
    if positive:
        line["evidence"] = [{"doc_id": positive[0]["doc_id"], "quote": positive[0]["quote"]}]
        pasted = [item["query"], positive[0]["quote"]]
    else:
        line |= {"answerable": False, "evidence": []}
        pasted = [item["query"]]
    line |= {"gold_answer": item["gold_answer"], "source": "log"}
    keys = len(json.dumps(line, ensure_ascii=False)) - sum(map(len, pasted)) - len(item["gold_answer"])
    return {"by_hand_keys": keys, "by_hand_copy_paste": 3 * len(pasted)}

