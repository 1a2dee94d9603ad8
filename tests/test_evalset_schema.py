"""The eval-set records (ragexp.data.evalset_schema): one reader and writer shared by the loader,
the annotation session and the page's queue; bounded grades, tags that can become metric names,
line-break characters that survive a write and a re-read, and the annotator each item records."""

from __future__ import annotations

import json

import pytest

from ragexp.annotation.session import Session, check_queue_row
from ragexp.data.evalset_schema import (
    EvidenceRecord,
    ItemRecord,
    dumps_line,
    evidence_from_json,
    item_from_json,
    item_to_json,
    read_file,
)
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.errors import RagexpInputError
from tests.helpers.tiny_dataset import TINY_DOCS, write_tiny_dataset

QUOTE = "retried with exponential backoff for 24 hours"


def span(quote: str = QUOTE, grade: int = 1) -> dict:
    start = TINY_DOCS["webhooks"].index(quote)
    return {"doc_id": "webhooks", "start": start, "end": start + len(quote), "quote": quote, "grade": grade}


def test_a_full_item_reads_back_to_an_equal_record() -> None:
    obj = {"id": "q1", "query": "How long?", "evidence": [{"doc_id": "d", "quote": "x", "occurrence": 2, "grade": 3}],
           "gold_chunk_ids": ["d#chunk_0"], "gold_answer": "a", "answers": ["a", "b"], "key_facts": ["k"],
           "tags": ["multi-chunk", "Über_2"], "category": "paraphrase", "answerable": True, "source": "log",
           "added": "2026-12-04", "annotator": "ana"}
    record = item_from_json(obj)
    assert record.evidence == (EvidenceRecord(doc_id="d", quote="x", occurrence=2, grade=3),)
    assert record.tags == ("multi-chunk", "Über_2") and record.annotator == "ana"
    assert item_from_json(item_to_json(record)) == record
    assert item_to_json(ItemRecord(id="q", query="?")) == {"id": "q", "query": "?", "evidence": []}


@pytest.mark.parametrize(("obj", "field", "message"), [
    ({"doc_id": "d", "grade": 10**400}, "evidence[0].grade", "at most 10"),
    ({"doc_id": "d", "grade": 11}, "evidence[0].grade", "at most 10"),
    ({"doc_id": "d", "grade": -1}, "evidence[0].grade", "must be >= 0"),
    ({"doc_id": "d", "grade": True}, "evidence[0].grade", "must be an integer"),
    ({"doc_id": "d", "start": 1}, "evidence[0].end", "needs both start and end"),
    ({"doc_id": "d", "page": 1}, "evidence[0].page", "unknown evidence field"),
])
def test_bad_evidence_is_refused_naming_the_field(obj, field, message) -> None:
    with pytest.raises(RagexpInputError) as err:
        evidence_from_json(obj, prefix="evidence[0]")
    assert err.value.field == field and message in err.value.message
    assert evidence_from_json({"doc_id": "d", "grade": 10}).grade == 10


@pytest.mark.parametrize(("extra", "field"), [
    ({"tags": ["x?y"]}, "tags[0]"), ({"tags": ["a" * 65]}, "tags[0]"), ({"tags": [""]}, "tags[0]"),
    ({"category": "two words"}, "category"), ({"annotator": " "}, "annotator"), ({"annotator": "a" * 65}, "annotator"),
    ({"judge": "me"}, "judge"), ({"source": "web"}, "source"), ({"id": ""}, "id"),
])
def test_bad_item_fields_are_refused(extra, field) -> None:
    with pytest.raises(RagexpInputError) as err:
        item_from_json({"id": "q1", "query": "q", **extra})
    assert err.value.field == field


def test_a_huge_grade_in_a_file_is_one_line_error(tmp_path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"id": "q1", "query": "q", "evidence": [{"doc_id": "d", "grade": 1' + "0" * 400 + "}]}\n")
    with pytest.raises(RagexpInputError, match="out of range") as err:
        read_file(path)
    assert err.value.line == 1 and "\n" not in str(err.value)


def test_line_break_characters_are_escaped_so_the_line_reads_back() -> None:
    obj = {"gold_answer": "one\u2028two\u2029three\x85four é"}
    line = dumps_line(obj)
    assert len(line.splitlines()) == 1 and "é" in line and json.loads(line) == obj


@pytest.fixture
def corpus_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_tiny_dataset(tmp_path)[0]


def test_a_gold_answer_with_u2028_is_saved_and_reopened(tmp_path, corpus_dir) -> None:
    evalset = tmp_path / "built.jsonl"
    session = Session(evalset)
    session.queue([{"id": "a", "query": "How long are webhooks retried?"}], "test")
    session.update("a", {"evidence": [span()], "confirmed": True, "gold_answer": "24\u2028hours"},
                   {"evidence": [], "confirmed": False, "gold_answer": ""})
    assert Session(evalset).entry("a")["gold_answer"] == "24\u2028hours"
    assert load_evalset(evalset, load_corpus(corpus_dir)).items[0].gold_answer == "24\u2028hours"


def test_the_annotator_is_recorded_on_what_they_judged_and_changes_no_fingerprint(tmp_path, corpus_dir) -> None:
    evalset = tmp_path / "built.jsonl"
    Session(evalset).queue([{"id": "a", "query": "How long are webhooks retried?"},
                            {"id": "b", "query": "Who is the CEO?"}], "test")
    Session(evalset, annotator="ana").update("a", {"evidence": [span()], "confirmed": True},
                                             {"evidence": [], "confirmed": False})
    Session(evalset).update("b", {"answerable": False, "confirmed": True}, {"answerable": True, "confirmed": False})
    lines = [json.loads(line) for line in evalset.read_text().splitlines()[1:]]
    assert [line.get("annotator") for line in lines] == ["ana", None]
    corpus = load_corpus(corpus_dir)
    loaded = load_evalset(evalset, corpus)
    assert [item.annotator for item in loaded] == ["ana", None]
    evalset.write_text("\n".join(json.dumps({k: v for k, v in line.items() if k != "annotator"}) for line in lines))
    assert load_evalset(evalset, corpus).fingerprint() == loaded.fingerprint()


def test_queue_rows_are_checked_against_the_schema_before_anything_is_queued(tmp_path) -> None:
    evalset = tmp_path / "built.jsonl"
    hostile = {"query": "q", "evidence": [{"doc_id": "d", "start": '<img src=x onerror="alert(1)">'}]}
    with pytest.raises(RagexpInputError) as err:
        check_queue_row(hostile, file=tmp_path / "rows.jsonl", line=3)
    assert (err.value.line, err.value.field) == (3, "evidence[0].start")
    with pytest.raises(RagexpInputError, match="a tag is"):
        Session(evalset).queue([{"query": "ok"}, {"query": "q", "tags": ["x?y"]}], "rows.jsonl")
    assert not evalset.exists()
    check_queue_row({"query": "q", "log": "logs/a.jsonl", "line": 7, "frequency": 3})  # origin keys kept, not refused
