"""The annotation queue beyond single edits: deleting a question queued by mistake (only one the
eval set does not hold, safe to retry)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation, routers
from ragexp.annotation.session import Session, sidecar_path
from ragexp.errors import RagexpInputError
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


def test_units_queued_on_a_done_item_show_as_review_with_a_count_until_reviewed(client) -> None:
    page, evalset = client
    start = TINY_DOCS["webhooks"].index(QUOTE)
    gold = {"doc_id": "webhooks", "start": start, "end": start + len(QUOTE), "quote": QUOTE}
    page.put("/api/entries/a", json={"changes": {"evidence": [gold], "confirmed": True},
                                     "before": {"evidence": [], "confirmed": False}})
    session = Session(evalset)
    units = [{"unit_id": "refunds#chunk_0", "doc_id": "refunds", "start": 0, "end": 20},
             {"unit_id": "webhooks#chunk_1", "doc_id": "webhooks", "start": start - 5, "end": start + 60}]
    session.attach_review("a", units, "unjudged in the top 2 of run r")
    session.save()

    def shown() -> tuple[str, int]:
        entry = next(e for e in page.get("/api/state").json()["entries"] if e["id"] == "a")
        return entry["status"], entry["pending"]

    assert shown() == ("review", 1)  # the second unit holds the gold span: judged already
    negative = {"doc_id": "refunds", "start": 0, "end": 20, "quote": TINY_DOCS["refunds"][:20], "grade": 0}
    page.put("/api/entries/a", json={"changes": {"evidence": [gold, negative]}, "before": {"evidence": [gold]}})
    assert shown() == ("review", 0)
    page.put("/api/entries/a", json={"changes": {"reviewed": True}, "before": {"reviewed": False}})
    assert shown() == ("done", 0)


def test_failures_of_a_retrieval_only_run_are_its_misses_and_the_report_says_why(tmp_path) -> None:
    from ragexp.annotation.from_run import queue_failures
    from ragexp.datamodel import Chunk
    from ragexp.evaluation.results import QueryResult, RunResults

    rows = [{"query_id": "hit", "query": "q hit", "ranking": [["d#chunk_0", 2.0], ["d#chunk_1", 1.0]], "relevant": {"d#chunk_0": 1}},
            {"query_id": "miss", "query": "q miss", "ranking": [["d#chunk_1", 2.0], ["d#chunk_2", 1.0], ["d#chunk_0", 0.5]],
             "relevant": {"d#chunk_0": 1}}]
    results = RunResults(meta={"context_k": 2, "run_id": "r"}, aggregates={}, per_query=[QueryResult.from_dict(row) for row in rows])
    chunks = {f"d#chunk_{i}": Chunk(id=f"d#chunk_{i}", doc_id="d", index=i, start=10 * i, end=10 * i + 10, text="x" * 10)
              for i in range(3)}
    session = Session(tmp_path / "e.jsonl")
    report = queue_failures(session, results, chunks)
    assert [e["id"] for e in session.entries] == ["miss"]
    assert [u["unit_id"] for u in session.entry("miss")["review"]["units"]] == ["d#chunk_1", "d#chunk_2"]
    assert "retrieval-only" in report.render("units") and "need a run with a generator" in report.render("units")


def test_the_state_lists_the_corpus_folder_once_per_request_whatever_the_entries(client, monkeypatch) -> None:
    from ragexp.annotation import live_corpus

    page, _ = client
    calls = []
    listing = live_corpus._snapshot
    monkeypatch.setattr(live_corpus, "_snapshot", lambda root: calls.append(root) or listing(root))
    assert len(page.get("/api/state").json()["entries"]) == 2
    assert len(calls) == 1


def test_a_conflict_names_theirs_and_the_before_that_keeps_mine(client) -> None:
    page, evalset = client
    first = page.put("/api/entries/a", json={"changes": {"gold_answer": "theirs"}, "before": {"gold_answer": ""}})
    assert first.status_code == 200
    mine = {"changes": {"gold_answer": "mine", "tags": ["boundary"]}, "before": {"gold_answer": "", "tags": []}}
    conflict = page.put("/api/entries/a", json=mine)
    assert conflict.status_code == 409
    detail = conflict.json()["detail"]
    assert detail["theirs"] == {"gold_answer": "theirs"} and detail["before"] == {"gold_answer": "theirs", "tags": []}
    assert Session(evalset).entry("a")["gold_answer"] == "theirs"  # nothing written
    kept = page.put("/api/entries/a", json={**mine, "before": detail["before"]})  # "keep mine"
    assert kept.status_code == 200
    assert (Session(evalset).entry("a")["gold_answer"], Session(evalset).entry("a")["tags"]) == ("mine", ["boundary"])


def test_the_runs_chunking_is_read_through_the_gate_from_a_folder_removed_afterwards(tmp_path, monkeypatch) -> None:
    """The saved config is downloaded to a temporary folder, read through the whole gate (an edited
    file with an interpolation is refused, naming the run: tests/security/test_parse_bounds.py has
    the family), and the folder is gone afterwards, after a refusal too."""
    import argparse

    from ragexp.commands import _evalset_annotate
    from ragexp.tracking import store

    folders = []
    saved_text = ("dataset: {_target_: ragexp.data.dataset.DemoDataset, name: demo}\n"
                  "retrieval: {name: bm25, _target_: reference_pipelines.bm25.BM25Retriever}\n")

    def download(run_id, artifact, uri, dst_dir):
        folders.append(dst_dir)
        saved = dst_dir / "resolved.yaml"
        saved.write_text(saved_text + chunking, encoding="utf-8")
        return saved

    monkeypatch.setattr(store, "download_artifact", download)
    args = argparse.Namespace(from_run="0" * 32, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}")
    chunking = "chunking: {name: fixed, size: 300, overlap: 30}\n"
    options = _evalset_annotate._run_chunking(args)
    assert (options["name"], options["size"], options["overlap"]) == ("fixed", 300, 30)
    chunking = "chunking:\n  name: fixed\n  size: ${oc.env:HOME}\n"
    with pytest.raises(RagexpInputError, match=r"run 0{32}: config/resolved.yaml.*interpolation"):
        _evalset_annotate._run_chunking(args)
    assert len(folders) == 2 and not any(folder.exists() for folder in folders)
