"""``ragexp evalset draft`` against a real HTTP server speaking the OpenAI protocol, and once with the
local model: drafts keep only evidence that resolves exactly once, and go to a queue, not an eval set."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from ragexp.candidates.drafts import CATEGORIES, occurrences, parse_reply
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from tests.helpers.cli import ragexp
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok

GOOD = "Deliveries are retried for 24 hours."
SECOND = "Keys rotate without downtime."
TWICE = "See the table below."
SECTION = ("Webhook deliveries that fail are tried again with a growing pause between attempts. " + GOOD + " " + TWICE +
           " After that the event is marked as failed and shown in the dashboard.")  # fmt: skip
OTHER = "Every key has a scope and an owner. " + SECOND + " " + TWICE + " Revoked keys stop working within a minute of revocation."


def _corpus(root):
    corpus = root / "corpus"
    corpus.mkdir()
    for name in ("alpha", "beta", "gamma"):
        (corpus / f"{name}.md").write_text(f"# {name}\n\n## Retries\n\n{SECTION}\n\n## Keys\n\n{OTHER}\n", encoding="utf-8")
    return corpus


def _reply(question, *quotes, answer="24 hours"):
    return "\n".join([f"Question: {question}", *(f"Quote: {q}" for q in quotes), f"Answer: {answer}"])


def test_parse_reply_reads_the_asked_form_and_refuses_anything_else():
    assert parse_reply(_reply("How long?", GOOD)) == ("How long?", [GOOD], "24 hours")
    assert parse_reply('Sure!\nquestion: "How long?"\nQUOTE: a\nquote: b\nAnswer: x\nQuestion: again?') == ("How long?", ["a", "b"], "x")
    assert parse_reply("Question: How long?\nAnswer: 24 hours") is None
    assert occurrences("aaa", "aa") == [0, 1]


def test_drafts_from_an_http_endpoint_keep_only_resolving_evidence(tmp_path):
    corpus = _corpus(tmp_path)
    queue = tmp_path / "drafts.jsonl"
    with FakeOpenAIServer() as server:
        # One prompt per category, in CATEGORIES order: kept, unparseable, ambiguous quote, kept with two quotes.
        server.script(ok(_reply("How long does ragexp keep trying a failed delivery?", GOOD)), ok("I cannot help with that."),
                      ok(_reply("What is below?", TWICE)), ok(_reply("How long are retries, and do keys rotate?", GOOD, SECOND)))
        proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--out", str(queue),
                      "--generator", "openai", "--base-url", server.base_url, "--model", "fake-model")
        assert server.hits == 4
        prompts = [r["body"]["messages"][-1]["content"] for r in server.requests]
    assert "Passage A:" in prompts[3] and "where the two sections meet" in prompts[2]
    assert "asked fake-model for 4 drafts: 1 paraphrase, 1 synonym, 1 boundary, 1 multi-chunk" in proc.stdout
    assert "kept 2: 1 paraphrase, 1 multi-chunk" in proc.stdout
    assert "dropped 2: 1 reply not in the asked form, 1 quote occurs more than once" in proc.stdout
    lines = [json.loads(line) for line in queue.read_text(encoding="utf-8").splitlines()]
    assert [line["tags"] for line in lines] == [["paraphrase"], ["multi-chunk"]]
    texts = {doc.id: doc.text for doc in load_corpus(corpus).documents()}
    for line in lines:
        assert line["source"] == "draft" and line["model"] == "fake-model"
        datetime.fromisoformat(line["added"])
        for evidence in line["evidence"]:
            assert texts[evidence["doc_id"]][evidence["start"]:evidence["end"]] == evidence["quote"]
    assert [e["quote"] for e in lines[1]["evidence"]] == [GOOD, SECOND]
    # A queue line carries what an eval-set item needs: with an id it loads as one.
    item = {"id": "d1", **{k: lines[0][k] for k in ("query", "evidence", "gold_answer", "tags", "source", "added")}}
    item["evidence"] = [{k: e[k] for k in ("doc_id", "quote")} for e in item["evidence"]]
    (tmp_path / "accepted.jsonl").write_text(json.dumps(item) + "\n", encoding="utf-8")
    assert load_evalset(tmp_path / "accepted.jsonl", load_corpus(corpus)).items[0].source == "draft"

    with FakeOpenAIServer() as server:  # the same drafts again: nothing new is appended
        server.script(ok(_reply("How long does ragexp keep trying a failed delivery?", GOOD)), ok("no"), ok("no"),
                      ok(_reply("How long are retries, and do keys rotate?", GOOD, SECOND)))
        again = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--out", str(queue),
                       "--generator", "openai", "--base-url", server.base_url, "--model", "fake-model")
    assert "appended 0 drafts" in again.stdout
    assert len(queue.read_text(encoding="utf-8").splitlines()) == 2


def test_bad_draft_arguments_fail_before_any_model_call(tmp_path):
    corpus = _corpus(tmp_path)
    proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--generator", "openai", check=False)
    assert proc.returncode == 2 and "--generator openai needs --base-url and --model" in proc.stderr
    proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "0", check=False)
    assert proc.returncode == 2 and "--per-category" in proc.stderr
    assert not (tmp_path / "drafts.jsonl").exists()
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query": "cut off\n', encoding="utf-8")
    with FakeOpenAIServer() as server:
        proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--out", str(broken),
                      "--generator", "openai", "--base-url", server.base_url, "--model", "fake-model", check=False)
        assert server.hits == 0  # the queue is read before any model call
    assert proc.returncode == 2 and "broken.jsonl:1: malformed JSON" in proc.stderr


@pytest.mark.slow
def test_drafts_from_the_local_model(tmp_path):
    """SmolLM2-135M, offline: every asked draft is kept or dropped with a reason, and what is kept resolves."""
    corpus = _corpus(tmp_path)
    queue = tmp_path / "drafts.jsonl"
    proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--out", str(queue))
    assert re.search(rf"asked smollm2-135m\S* for {len(CATEGORIES)} drafts", proc.stdout)
    kept = int(proc.stdout.split("kept ")[1].split(":")[0])
    dropped = int(proc.stdout.split("dropped ")[1].split(":")[0]) if "dropped " in proc.stdout else 0
    assert kept + dropped == len(CATEGORIES)
    texts = {doc.id: doc.text for doc in load_corpus(corpus).documents()}
    lines = [json.loads(line) for line in queue.read_text(encoding="utf-8").splitlines()] if queue.exists() else []
    assert len(lines) <= kept
    for line in lines:
        assert all(texts[e["doc_id"]].count(e["quote"]) == 1 for e in line["evidence"])


def test_no_kept_draft_creates_no_queue_file(tmp_path):
    corpus = _corpus(tmp_path)
    with FakeOpenAIServer() as server:
        server.script(*[ok("no idea")] * 4)
        proc = ragexp(tmp_path, "evalset", "draft", "--corpus", str(corpus), "--per-category", "1", "--out", str(tmp_path / "q.jsonl"),
                      "--generator", "openai", "--base-url", server.base_url, "--model", "fake-model")
    assert "dropped 4: 4 reply not in the asked form" in proc.stdout and "appended 0 drafts" in proc.stdout
    assert not (tmp_path / "q.jsonl").exists()
