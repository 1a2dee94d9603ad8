"""The annotation queue beyond single edits: deleting a question queued by mistake (only one the
eval set does not hold, safe to retry)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation, routers
from ragexp.annotation.session import Session, sidecar_path
from ragexp.web.app import create_app
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset

QUOTE = "retried with exponential backoff for 24 hours"


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    evalset = tmp_path / "built.jsonl"
    Session(evalset).queue([{"id": "a", "query": "How long are webhooks retried?"}, {"id": "junk", "query": "j"}], "test")
    annotation = Annotation(Session(evalset), LiveCorpus(corpus_dir), Pooler(["bm25"], depth=3))
    app = create_app(routers(annotation), "annotate.html")
    return TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1"), evalset


def test_a_queued_question_is_deleted_once_and_a_retry_writes_nothing(client) -> None:
    page, evalset = client
    assert page.delete("/api/entries/junk").json() == {"deleted": True}
    written = sidecar_path(evalset).read_bytes()
    assert page.delete("/api/entries/junk").json() == {"deleted": False}
    assert sidecar_path(evalset).read_bytes() == written
    assert [e["id"] for e in Session(evalset).entries] == ["a"]


def test_a_question_in_the_eval_set_is_not_deleted(client) -> None:
    page, evalset = client
    start = TINY_DOCS["webhooks"].index(QUOTE)
    evidence = [{"doc_id": "webhooks", "start": start, "end": start + len(QUOTE), "quote": QUOTE}]
    reply = page.put("/api/entries/a", json={"changes": {"evidence": evidence, "confirmed": True},
                                             "before": {"evidence": [], "confirmed": False}})
    assert reply.status_code == 200
    written = evalset.read_bytes()
    reply = page.delete("/api/entries/a")
    assert reply.status_code == 422 and "in the eval set" in reply.text
    assert evalset.read_bytes() == written


def test_a_delete_from_another_site_is_refused(client) -> None:
    page, evalset = client
    assert page.delete("/api/entries/junk", headers={"Origin": "http://evil.example"}).status_code == 403
    assert Session(evalset).entry("junk") is not None
