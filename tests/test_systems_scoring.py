"""A black-box system's units and their relevance (:mod:`ragexp.systems.scoring`): the overlap
rule over the run's pool, against ragexp's own chunk qrels where a tiling exists, and the counts a
black box needs (trimmed span size, unreturned evidence) on cases built by hand."""

from __future__ import annotations

from ragexp.chunking import make_chunker
from ragexp.datamodel import Chunk, Document, EvalItem, Evidence
from ragexp.metrics.relevance import OverlapRule, chunk_qrels
from ragexp.systems.locate import Placement
from ragexp.systems.response import Passage
from ragexp.systems.scoring import pooled_qrels, ranked, trimmed_span, unit_of

TEXT = ("Failed deliveries are retried with exponential backoff for 24 hours. After the last attempt the delivery "
        "is marked failed.\n\nEach attempt times out after 10 seconds. Respond quickly and process later.\n")
CORPUS = {"webhooks": Document("webhooks", TEXT, "Webhooks"), "empty": Document("empty", "", "")}


def span(quote: str, grade: int = 1) -> Evidence:
    start = TEXT.index(quote)
    return Evidence("webhooks", start, start + len(quote), grade)


def unit(start: int, end: int) -> Chunk:
    return unit_of(Passage(TEXT[start:end]), Placement("exact", "webhooks", start, end, 1.0), CORPUS)


def test_with_the_whole_tiling_as_pool_the_qrels_are_ragexps_chunk_qrels():
    chunks = make_chunker({"name": "fixed", "unit": "chars", "size": 40, "overlap": 8}).chunk_corpus(
        {"webhooks": CORPUS["webhooks"]}, progress=False)
    items = [EvalItem("q1", "?", (span("retried with exponential backoff for 24 hours"),)),
             EvalItem("q2", "?", (span("times out after 10 seconds"), span("marked failed", grade=0))),
             EvalItem("q3", "?", (Evidence("webhooks"),))]
    rule = OverlapRule()
    native = chunk_qrels(items, {"webhooks": chunks}, rule)
    pool = [unit(c.start, c.end) for c in chunks]
    black_box, unreturned = pooled_qrels(items, pool, CORPUS, rule, set())
    renamed = {qid: {f"webhooks#chunk_{c.start}-{c.end}": g for c in chunks for cid, g in grades.items() if cid == c.id}
               for qid, grades in native.items()}
    assert black_box == renamed and unreturned == 0
    assert 0 in black_box["q2"].values()  # a judged negative stays judged


def test_evidence_no_returned_passage_covers_is_a_relevant_unit_missed():
    items = [EvalItem("q1", "?", (span("retried with exponential backoff"), span("times out after 10 seconds"))),
             EvalItem("q2", "?", (Evidence("webhooks"), Evidence("empty"))),
             EvalItem("q3", "?", (span("Respond quickly", grade=0),))]
    start = TEXT.index("Failed")
    pool = [unit(start, start + 60)]
    qrels, unreturned = pooled_qrels(items, pool, CORPUS, OverlapRule(), {"empty"})
    timeout = span("times out after 10 seconds")
    assert qrels["q1"] == {pool[0].id: 1, f"unreturned:webhooks:{timeout.start}-{timeout.end}": 1}
    assert qrels["q2"] == {pool[0].id: 1, "empty": 1}  # a document without text counts by its id, as in a ragexp run
    assert qrels["q3"] == {} and unreturned == 1  # a judged negative nobody returned adds nothing


def test_a_span_counts_without_the_whitespace_at_its_ends():
    start = TEXT.index("\n\nEach")
    assert trimmed_span(TEXT, start - 3, start + 6) == (start - 3, start + 2 + 4)
    assert trimmed_span(TEXT, start, start + 2) == (start, start)


def test_units_keep_the_systems_order_once_each_and_unplaced_ones_keep_their_rank():
    a, b = unit(0, 20), unit(30, 60)
    lost = unit_of(Passage("text from a deleted page"), Placement("unlocated", "gone", reason="x"), CORPUS)
    order = ranked([b, lost, a, b])
    assert [u.id for u in order.units] == [b.id, lost.id, a.id] and order.duplicates == 1
    assert order.ranking() == [(b.id, 3.0), (lost.id, 2.0), (a.id, 1.0)]
    assert lost.id.startswith("unlocated:") and "#chunk_" not in lost.id
