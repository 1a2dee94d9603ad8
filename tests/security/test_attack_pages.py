"""Attacks on the pages (issue #30 class 4): stored script in the annotation page.

A value read from a file (a query log line, the eval set, the sidecar queue, a corpus document)
must never run in the page or send anything elsewhere:

- the pages have one rendering path, text nodes (``static/text.js``): no script builds markup;
- every response carries a strict Content-Security-Policy (no inline script or style,
  ``connect-src 'self'``), so even markup that reached the page could not run or post elsewhere;
- queue rows are checked by the eval-set schema before the page sees them (a ``start`` holding
  markup is refused, one line, exit 2, nothing queued);
- in Debian's Chromium, a page showing hostile stored strings in every field it renders runs none
  of them and shows each as the text it is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation, routers
from ragexp.annotation.session import Session, sidecar_path
from ragexp.web.app import CONTENT_SECURITY_POLICY, STATIC_DIR, create_app
from tests.helpers.chromium import CHROMIUM, launched
from tests.helpers.cli import ragexp
from tests.helpers.page_server import start_page, stop_page
from tests.helpers.tiny_dataset import write_tiny_dataset

IMG = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">'
SCRIPT = "<script>window.__pwned=(window.__pwned||0)+1</script>"
MARKUP_SINKS = re.compile(r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*[\"']on")


def test_no_page_script_builds_markup_from_strings() -> None:
    scripts = sorted(STATIC_DIR.glob("*.js"))
    assert scripts
    for script in scripts:
        assert not MARKUP_SINKS.search(script.read_text(encoding="utf-8")), script.name
    for page in STATIC_DIR.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\son\w+=|style=", html), page.name  # CSP allows none


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    evalset = tmp_path / "built.jsonl"
    annotation = Annotation(Session(evalset), LiveCorpus(corpus_dir), Pooler(["bm25"], depth=3))
    return TestClient(create_app(routers(annotation), "annotate.html"), raise_server_exceptions=False,
                      base_url="http://127.0.0.1")


@pytest.mark.parametrize("path", ["/", "/static/annotate.js", "/api/state", "/api/entries/none/candidates"])
def test_every_response_carries_the_content_security_policy(client, path) -> None:
    reply = client.get(path)
    assert reply.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "connect-src 'self'" in CONTENT_SECURITY_POLICY and "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert client.get(path, headers={"Host": "evil.example"}).headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_a_queries_line_with_markup_in_an_evidence_start_is_refused_before_anything_is_queued(tmp_path) -> None:
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"query": "fine"}) + "\n"
                    + json.dumps({"query": "How long?", "evidence": [{"doc_id": "webhooks", "start": IMG, "end": 9}]}) + "\n")
    evalset = tmp_path / "built.jsonl"
    proc = ragexp(tmp_path, "evalset", "annotate", str(evalset), "--corpus", str(corpus_dir), "--queries", str(rows),
                  "--queue-only", check=False)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "rows.jsonl:2" in proc.stderr and "evidence[0].start" in proc.stderr
    assert not sidecar_path(evalset).exists() and not evalset.exists()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM}")
def test_hostile_stored_strings_show_as_text_and_run_nothing_in_chromium(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    (corpus_dir / "evil.md").write_text(f"# Title {IMG}\n\nWebhooks retried text {SCRIPT} and {IMG} here.\n", encoding="utf-8")
    evalset = tmp_path / "built.jsonl"
    query = f"How long are webhooks retried? {IMG}"
    evalset.write_text(json.dumps({"ragexp_evalset": 1, "name": "n"}) + "\n" + json.dumps(
        {"id": "a", "query": query, "gold_answer": SCRIPT, "key_facts": [IMG],
         "evidence": [{"doc_id": "webhooks", "start": 0, "end": 5, "quote": IMG}]}) + "\n", encoding="utf-8")
    Session(evalset).queue([{"query": f"{SCRIPT} second"}], "test")
    server, url = start_page(tmp_path, ["evalset", "annotate", str(evalset), "--corpus", str(corpus_dir), "--port", "0",
                                        "--pipelines", "bm25"])
    try:
        with launched() as browser:
            page = browser.new_page()
            page.goto(url + "#a")
            page.wait_for_function("() => document.querySelectorAll('#candidates .passage').length > 0", timeout=120_000)
            page.fill("#search", "webhooks retried text")
            page.press("#search", "Enter")
            page.wait_for_function("() => document.querySelectorAll('#search-results .passage').length > 0", timeout=60_000)
            assert page.locator("#query").inner_text() == query
            assert page.input_value("#gold") == SCRIPT and page.input_value("#facts") == IMG
            assert IMG in page.locator("#spans").inner_text()
            assert SCRIPT in page.locator("#queue").inner_text()
            assert IMG in page.locator("#search-results").inner_text()
            assert page.evaluate("() => document.querySelectorAll('img, script:not([src])').length") == 0
            # markup that did reach the DOM could not run either: the policy forbids inline handlers
            page.evaluate("() => { const d = document.createElement('div'); d.setAttribute('id', 'probe');"
                          f" document.body.append(d); d.outerHTML = {json.dumps(IMG)}; }}")
            page.wait_for_timeout(500)
            assert page.evaluate("() => window.__pwned") is None
    finally:
        stop_page(server)
