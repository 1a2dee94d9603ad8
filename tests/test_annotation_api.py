"""The annotation page's API without a browser: saves land in a valid eval set, a second page
changing the same field differently gets 409, a corpus changed under an open page writes nothing
wrong, a save written before the server died (reply lost) is retried against the restarted server
without a conflict and without being applied twice, and --from-run queues exactly the unjudged units."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient

from ragexp.annotation.from_run import queue_unjudged, unjudged_units
from ragexp.annotation.live_corpus import LiveCorpus
from ragexp.annotation.pool import Pooler
from ragexp.annotation.server import Annotation, routers
from ragexp.annotation.session import Session, sidecar_path
from ragexp.chunking import make_chunker
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.errors import RagexpInputError
from ragexp.metrics.relevance import chunk_qrels
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.metrics.judged import judged_at_k
from ragexp.web.app import create_app
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset


def start_server(evalset, corpus_dir) -> TestClient:
    """A server as ``ragexp evalset annotate`` starts it: everything read from the files (a restart)."""
    annotation = Annotation(Session(evalset), LiveCorpus(corpus_dir), Pooler(["bm25"], depth=3))
    return TestClient(create_app(routers(annotation), "annotate.html"), raise_server_exceptions=False,
                      base_url="http://127.0.0.1")


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the pool's stage cache defaults to ./.ragexp_cache
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    evalset = tmp_path / "built.jsonl"
    Session(evalset).queue([{"query": "How long are webhooks retried?", "source": "log"},
                            {"query": "What is the CEO's favourite colour?", "source": "log"}], "test")
    return start_server(evalset, corpus_dir), evalset, corpus_dir


def put(client, item_id, changes, before):
    """What the page sends: the new values and the ones it showed when the person changed them."""
    return client.put(f"/api/entries/{item_id}", json={"changes": changes, "before": before})


def files(evalset) -> tuple[bytes, bytes]:
    return evalset.read_bytes(), sidecar_path(evalset).read_bytes()


def span(doc_id: str, quote: str, grade: int = 1) -> dict:
    start = TINY_DOCS[doc_id].index(quote)
    return {"doc_id": doc_id, "start": start, "end": start + len(quote), "quote": quote, "grade": grade}


def test_spans_negatives_and_unanswerable_reach_a_valid_eval_set(page):
    client, evalset, corpus_dir = page
    state = client.get("/api/state").json()
    first, second = (e["id"] for e in state["entries"])
    pool = client.get(f"/api/entries/{first}/candidates").json()
    assert pool["kind"] == "pool" and pool["candidates"]
    negative = client.get("/api/documents/refunds").json()  # a passage the pool did not show, judged by hand
    evidence = [span("webhooks", "retried with exponential backoff for 24 hours"),
                {"doc_id": negative["doc_id"], "start": negative["start"], "end": negative["end"], "quote": negative["text"], "grade": 0}]
    reply = put(client, first, {"evidence": evidence, "confirmed": True, "gold_answer": "24 hours"},
                {"evidence": [], "confirmed": False, "gold_answer": ""})
    assert reply.status_code == 200, reply.text
    reply = put(client, second, {"answerable": False, "confirmed": True}, {"answerable": True, "confirmed": False})
    assert reply.status_code == 200 and reply.json()["coverage"]["progress"]["items"] == 2
    loaded = load_evalset(evalset, load_corpus(corpus_dir))
    by_id = {item.id: item for item in loaded}
    assert [e.grade for e in by_id[first].evidence] == [1, 0] and by_id[first].source == "log"
    assert by_id[second].answerable is False
    assert json.loads(sidecar_path(evalset).read_text())["entries"][0]["gold_answer"] == "24 hours"


def test_a_second_page_changing_the_same_field_differently_gets_409_and_overwrites_nothing(page):
    client, evalset, _ = page
    item = client.get("/api/state").json()["entries"][0]["id"]  # both pages loaded this
    first = put(client, item, {"evidence": [span("webhooks", "24 hours")], "confirmed": True},
                {"evidence": [], "confirmed": False})
    assert first.status_code == 200
    written = files(evalset)
    other = put(client, item, {"evidence": [span("webhooks", "10 seconds")]}, {"evidence": []})
    assert other.status_code == 409, other.text
    assert other.json()["detail"]["message"].startswith(f"evidence of {item} changed since this page loaded it")
    assert files(evalset) == written
    # The same edit made on both pages is no conflict and writes nothing; another field merges.
    assert put(client, item, {"confirmed": True}, {"confirmed": False}).status_code == 200
    assert files(evalset) == written
    assert put(client, item, {"gold_answer": "24 hours"}, {"gold_answer": ""}).status_code == 200
    saved = json.loads(evalset.read_text().splitlines()[1])
    assert saved["gold_answer"] == "24 hours" and saved["evidence"][0]["quote"] == "24 hours"


def test_a_save_written_before_the_server_died_is_retried_without_conflict(page, monkeypatch):
    """The sequence of the flaky browser test: the page's save is written, its reply never arrives
    (here the reply fails with 500 after the write, as a request thread racing the pool warm-up for
    Hydra did; a SIGKILL does the same), the server restarts, the page retries the same save and
    sends its next change made on top of it. Before, the page kept its old etag and the next change
    was a 409 against its own save."""
    client, evalset, corpus_dir = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    evidence = [span("webhooks", "retried with exponential backoff for 24 hours")]
    assert put(client, item, {"evidence": evidence, "confirmed": True}, {"evidence": [], "confirmed": False}).status_code == 200
    typed = ({"gold_answer": "24"}, {"gold_answer": ""})
    monkeypatch.setattr(Annotation, "view", lambda *args: 1 / 0)  # the reply fails after the write
    assert put(client, item, *typed).status_code == 500
    monkeypatch.undo()
    written = files(evalset)
    assert json.loads(written[0].decode().splitlines()[1])["gold_answer"] == "24"  # it was written

    restarted = start_server(evalset, corpus_dir)  # the killed server comes back, state from disk only
    again = put(restarted, item, *typed)
    assert again.status_code == 200 and again.json()["entry"]["gold_answer"] == "24"
    assert files(evalset) == written  # already so: nothing written twice
    assert put(restarted, item, {"gold_answer": "24 hours"}, {"gold_answer": "24"}).status_code == 200
    assert json.loads(evalset.read_text().splitlines()[1])["gold_answer"] == "24 hours"


def test_a_server_killed_between_its_two_file_writes_loses_nothing(page):
    """The eval set was replaced, the sidecar not (killed between the two renames): the restarted
    server reads the eval set's item, the page's retry is already so and the next change applies."""
    client, evalset, corpus_dir = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    evidence = [span("webhooks", "24 hours")]
    sidecar_before = sidecar_path(evalset).read_bytes()
    change = ({"evidence": evidence, "confirmed": True, "gold_answer": "24 hours"},
              {"evidence": [], "confirmed": False, "gold_answer": ""})
    assert put(client, item, *change).status_code == 200
    sidecar_path(evalset).write_bytes(sidecar_before)  # the sidecar's rename never happened

    restarted = start_server(evalset, corpus_dir)
    assert put(restarted, item, *change).status_code == 200
    assert put(restarted, item, {"tags": ["verbatim"]}, {"tags": []}).status_code == 200
    side = json.loads(sidecar_path(evalset).read_text())["entries"][0]
    line = json.loads(evalset.read_text().splitlines()[1])
    assert (side["gold_answer"], side["tags"], line["gold_answer"], line["tags"]) == ("24 hours", ["verbatim"]) * 2
    assert [e["quote"] for e in line["evidence"]] == ["24 hours"]


def test_a_second_server_on_the_same_file_is_seen_before_a_change(page, tmp_path):
    """Two servers on one file: each reads the files again when the other wrote them, so a change
    to a field the other server changed is a conflict there too, never an overwrite."""
    client, evalset, corpus_dir = page
    other_server = start_server(evalset, corpus_dir)
    item = client.get("/api/state").json()["entries"][0]["id"]
    assert put(other_server, item, {"gold_answer": "from the other server"}, {"gold_answer": ""}).status_code == 200
    written = files(evalset)
    assert put(client, item, {"gold_answer": "from this page"}, {"gold_answer": ""}).status_code == 409
    assert files(evalset) == written
    view = next(e for e in client.get("/api/state").json()["entries"] if e["id"] == item)
    assert view["gold_answer"] == "from the other server"


def test_corpus_changed_under_an_open_page(page):
    client, evalset, corpus_dir = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    kept = span("webhooks", "24 hours")
    assert put(client, item, {"evidence": [kept], "confirmed": True}, {"evidence": [], "confirmed": False}).status_code == 200
    # Someone edits the document: text is inserted before the spans the page shows.
    (corpus_dir / "webhooks.md").write_text("# Webhooks\n\nNEW INTRO.\n" + TINY_DOCS["webhooks"][len("# Webhooks\n"):])
    before = evalset.read_bytes()
    outdated = span("webhooks", "10 seconds")  # offsets of the document the page still shows
    reply = put(client, item, {"evidence": [kept, outdated]}, {"evidence": [kept]})
    assert reply.status_code == 409 and "corpus changed" in reply.json()["detail"]["message"]
    assert evalset.read_bytes() == before  # nothing written
    view = next(e for e in client.get("/api/state").json()["entries"] if e["id"] == item)
    assert "no longer reads the quote" in view["stale"]["0"]  # the span already saved is shown stale, not moved
    assert json.loads(evalset.read_text().splitlines()[1])["evidence"][0]["start"] == kept["start"]


def test_from_run_queues_exactly_the_unjudged_units(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus_dir, _ = write_tiny_dataset(tmp_path)
    corpus = load_corpus(corpus_dir)
    chunker = make_chunker({"name": "fixed", "size": 60, "overlap": 0})
    chunks = chunker.chunk_corpus(corpus)
    by_id = {c.id: c for c in chunks}
    evalset = tmp_path / "set.jsonl"
    session = Session(evalset)
    session.queue([{"id": "a", "query": "How long are webhooks retried?", "source": "log",
                    "evidence": [span("webhooks", "exponential backoff for 24 hours")]}], "test")
    session.update("a", {"confirmed": True}, {"confirmed": False})
    by_doc = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    item = load_evalset(evalset, corpus).items[0]
    qrels = dict(chunk_qrels([item], by_doc).grades("a"))
    ranking = [[cid, float(100 - i)] for i, cid in enumerate(by_id)][:8]
    judged_first = next(iter(qrels))
    ranking.insert(0, [judged_first, 1000.0])
    ranking = list({cid: [cid, s] for cid, s in ranking}.values())
    results = RunResults(meta={"run_id": "r1", "context_k": 5}, aggregates={},
                         per_query=[QueryResult.from_dict({"query_id": "a", "query": item.query, "ranking": ranking,
                                                           "relevant": qrels})])
    k = 5
    expected = [cid for cid, _ in sorted(ranking, key=lambda r: -r[1])[:k] if cid not in qrels]
    assert unjudged_units(results, k) == {"a": expected} and len(expected) == k - 1
    report = queue_unjudged(session, results, by_id, k)
    assert (report.queries, report.units, report.new_items) == (1, k - 1, 0)
    queued = Session(evalset).entry("a")["review"]["units"]
    assert [u["unit_id"] for u in queued] == expected
    # Judging every queued unit (here: not relevant) brings the run's judged@k to 1.
    negatives = [{"doc_id": u["doc_id"], "start": u["start"], "end": u["end"],
                  "quote": corpus[u["doc_id"]].text[u["start"]:u["end"]], "grade": 0} for u in queued]
    fresh = Session(evalset)
    evidence = fresh.entry("a")["evidence"] + negatives
    fresh.update("a", {"evidence": evidence, "reviewed": True}, {"evidence": fresh.entry("a")["evidence"], "reviewed": False})
    judged = chunk_qrels(load_evalset(evalset, corpus).items, by_doc)["a"]
    assert judged_at_k([tuple(r) for r in ranking], qrels, k) == 1 / k
    assert judged_at_k([tuple(r) for r in ranking], judged, k) == 1.0


def test_busy_port_fails_at_once_before_loading_anything(tmp_path):
    import socket
    import subprocess
    import sys

    from tests.helpers.cli import ENV

    corpus_dir, _ = write_tiny_dataset(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "evalset", "annotate", str(tmp_path / "new.jsonl"),
                               "--corpus", str(corpus_dir), "--port", str(port)], cwd=tmp_path, env=ENV,
                              capture_output=True, text=True, timeout=120, check=False)
        elapsed = time.monotonic() - started
    assert proc.returncode == 2 and elapsed < 10, (proc.returncode, elapsed, proc.stderr)
    assert proc.stderr.strip().splitlines() == [
        f"ragexp evalset: error: field '--port': port {port} on 127.0.0.1 is already in use (Address already in use); "
        f"stop what runs there or pick another port, e.g. --port {port + 1}"]
    assert "http://" not in proc.stdout and not (tmp_path / "new.jsonl").exists()
    assert not (tmp_path / "new.annotation.json").exists()


def test_a_malformed_save_is_refused_with_422_and_writes_nothing(page):
    client, evalset, _ = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    written = files(evalset)
    for changes, before in (({"evidence": [{"doc_id": "webhooks", "start": 5, "end": 2, "quote": "x"}]}, {"evidence": []}),
                            ({"evidence": [{"doc_id": "webhooks", "grade": -1}]}, {"evidence": []}),
                            ({"tags": "synonym"}, {"tags": []}), ({"id": "other"}, {"id": item}),
                            ({"gold_answer": "no before"}, {})):
        reply = put(client, item, changes, before)
        assert reply.status_code == 422, (changes, reply.text)
    assert files(evalset) == written


def test_hostile_saves_and_questions_are_refused_and_write_nothing(page):
    """A quote that is not a string, a question that is not a string or is a whole file, a 10 MB
    gold answer: 4xx naming the field (they used to be stored: a list became the question "['a']",
    a 10 MB answer went into both files)."""
    client, evalset, _ = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    written = files(evalset)
    quote_is_a_number = put(client, item, {"evidence": [{"doc_id": "webhooks", "start": 0, "end": 4, "quote": 5}]},
                            {"evidence": []})
    assert quote_is_a_number.status_code == 422 and "a string quote" in quote_is_a_number.json()["detail"]
    for body, message in (({"query": ["a list"]}, "query: the question"), ({"query": 5}, "query: the question"),
                          ({"query": "   "}, "query: the question"), ({"query": "x " * 5000}, "is not a question")):
        reply = client.post("/api/entries", json=body)
        assert reply.status_code == 422 and message in reply.json()["detail"], (body, reply.text)
    huge = put(client, item, {"gold_answer": "y" * 10_000_000}, {"gold_answer": ""})
    assert huge.status_code == 413 and "larger than" in huge.json()["detail"]
    assert files(evalset) == written
    assert client.post("/api/entries", json={"query": "  A question typed on the page?  "}).json()["entry"]["query"] == \
        "A question typed on the page?"


@pytest.mark.parametrize(("sidecar", "evalset_line", "message"), [
    ({"ragexp_annotation": 1, "entries": [{"query": "no id"}]}, None, "field 'entries[0]': each entry needs a string id and query"),
    ({"ragexp_annotation": 1, "entries": [5]}, None, "field 'entries[0]': each entry needs a string id and query"),
    ({"ragexp_annotation": 1, "entries": [{"id": "a", "query": "q", "evidence": 5}]}, None, "evidence: a list of spans"),
    ({"ragexp_annotation": 1, "entries": [{"id": "a", "query": "q", "review": {"units": [{"doc_id": "webhooks"}]}}]}, None,
     "field 'entries[0]': review: needs units"),
    (None, {"id": "a", "query": "q", "evidence": "oops"}, "built.jsonl:1: evidence: a list of spans"),
    (None, {"id": "a", "query": "q", "evidence": [{"doc_id": "webhooks", "start": "a"}]}, "built.jsonl:1: evidence[0]: needs"),
    (None, {"id": "a", "query": "q", "tags": "synonym"}, "built.jsonl:1: tags: a list of strings"),
])
def test_files_edited_by_hand_into_shapes_a_page_cannot_send_fail_at_load(tmp_path, sidecar, evalset_line, message):
    """They used to raise KeyError/TypeError/AttributeError with a traceback at start, or answer
    500 on /api/state (an evidence span without an end)."""
    evalset = tmp_path / "built.jsonl"
    if sidecar is not None:
        sidecar_path(evalset).write_text(json.dumps(sidecar), encoding="utf-8")
    if evalset_line is not None:
        evalset.write_text(json.dumps(evalset_line) + "\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(RagexpInputError, match="move the file away") as err:
        Session(evalset)
    assert message in str(err.value), str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_save_with_evidence_that_is_not_a_list_is_refused_with_422(page):
    client, evalset, _ = page
    item = client.get("/api/state").json()["entries"][0]["id"]
    reply = put(client, item, {"evidence": 5}, {"evidence": []})
    assert reply.status_code == 422 and reply.json()["detail"] == "evidence: a list of spans"
