"""Span -> chunk relevance: the edge cases, the re-chunking invariant, and BEIR comparability."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ragexp.chunking import make_chunker
from ragexp.chunking.base import CandidateSpan, Chunker
from ragexp.datamodel import Chunk, Document, EvalItem, Evidence, chunk_id
from ragexp.errors import RagexpInputError
from ragexp.metrics.relevance import OverlapRule, chunk_qrels, doc_qrels
from tests.helpers.chunk_strategies import TEXTS, chunker_configs

LETTERS = "".join(chr(ord("a") + i % 26) for i in range(200))  # no whitespace: sizes are plain lengths


@dataclass(frozen=True)
class GivenSpans(Chunker):
    """A chunking with arbitrary spans, through the same trimming and ids as every chunker."""

    name = "given"
    spans: tuple[tuple[int, int], ...] = ()

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        for start, end in self.spans:
            yield start, end, doc.title

    def describe(self) -> str:
        return "given"


def chunks_at(spans: list[tuple[int, int]], text: str = LETTERS, doc_id: str = "d") -> dict[str, list[Chunk]]:
    chunks = GivenSpans(tuple(spans)).chunk(Document(doc_id, text))
    assert [(c.start, c.end) for c in chunks] == spans
    return {doc_id: chunks}


def span_item(*evidence: Evidence, item_id: str = "q") -> list[EvalItem]:
    return [EvalItem(item_id, "query?", tuple(evidence))]


def relevant(chunks_by_doc: dict[str, list[Chunk]], *evidence: Evidence, rule: OverlapRule = OverlapRule()) -> dict:
    return chunk_qrels(span_item(*evidence), chunks_by_doc, rule)["q"]


# ---------------------------------------------------------------- edge cases


def test_span_inside_one_chunk() -> None:
    assert relevant(chunks_at([(0, 50), (50, 100)]), Evidence("d", 10, 20)) == {"d#chunk_0": 1}


def test_span_across_a_boundary_split_50_50_marks_both_halves() -> None:
    assert relevant(chunks_at([(0, 50), (50, 100)]), Evidence("d", 40, 60)) == {"d#chunk_0": 1, "d#chunk_1": 1}


def test_span_across_a_boundary_split_70_30_marks_the_larger_part() -> None:
    assert relevant(chunks_at([(0, 50), (50, 100)]), Evidence("d", 36, 56)) == {"d#chunk_0": 1}
    assert relevant(chunks_at([(0, 50), (50, 100)]), Evidence("d", 44, 64)) == {"d#chunk_1": 1}
    assert relevant(chunks_at([(0, 50), (50, 100)]), Evidence("d", 36, 56), rule=OverlapRule(mode="any")) == {
        "d#chunk_0": 1, "d#chunk_1": 1,
    }


def test_span_inside_an_overlap_region_marks_both_overlapping_chunks() -> None:
    assert relevant(chunks_at([(0, 60), (40, 100)]), Evidence("d", 45, 55)) == {"d#chunk_0": 1, "d#chunk_1": 1}


def test_chunk_inside_a_long_span_is_relevant_by_the_chunk_fraction() -> None:
    chunks = chunks_at([(0, 20), (20, 40), (40, 60), (60, 100)])
    evidence = Evidence("d", 10, 70)  # 10 of chunk 0 (half of it), all of 1 and 2, 10 of chunk 3 (a quarter)
    first_three = {"d#chunk_0": 1, "d#chunk_1": 1, "d#chunk_2": 1}
    assert relevant(chunks, evidence) == first_three
    assert relevant(chunks, evidence, rule=OverlapRule(mode="chunk")) == first_three
    assert relevant(chunks, evidence, rule=OverlapRule(mode="span")) == {}  # no chunk holds half of 60 characters
    assert relevant(chunks, evidence, rule=OverlapRule(mode="span", min_fraction=0.3)) == {
        "d#chunk_1": 1, "d#chunk_2": 1,
    }


def test_repeated_text_marks_only_the_chunk_at_the_span_offsets() -> None:
    passage = "The refund window is thirty days from renewal."
    text = f"{passage}\n\nSomething else entirely in between.\n\n{passage}"
    doc = Document("d", text)
    chunks = make_chunker({"name": "recursive", "size": 50, "overlap": 0}).chunk(doc)
    assert [c.text for c in chunks].count(passage) == 2
    second = text.rindex(passage)
    assert relevant({"d": chunks}, Evidence("d", second, second + len(passage))) == {"d#chunk_2": 1}
    assert relevant({"d": chunks}, Evidence("d", 0, len(passage))) == {"d#chunk_0": 1}


def test_span_at_document_start_and_at_document_end() -> None:
    chunks = chunks_at([(0, 30), (30, 60), (60, 200)])
    assert relevant(chunks, Evidence("d", 0, 5)) == {"d#chunk_0": 1}
    assert relevant(chunks, Evidence("d", 195, 200)) == {"d#chunk_2": 1}
    assert relevant(chunks, Evidence("d", 0, 200)) == {"d#chunk_0": 1, "d#chunk_1": 1, "d#chunk_2": 1}


def test_duplicate_evidence_entries_count_once_at_their_highest_grade() -> None:
    chunks = chunks_at([(0, 50), (50, 100)])
    once = relevant(chunks, Evidence("d", 10, 20))
    assert relevant(chunks, Evidence("d", 10, 20), Evidence("d", 10, 20)) == once == {"d#chunk_0": 1}
    assert relevant(chunks, Evidence("d", 10, 20, grade=1), Evidence("d", 10, 20, grade=2)) == {"d#chunk_0": 2}


@pytest.mark.parametrize(("start", "end"), [(5, 5), (9, 5), (-1, 4), (3, None)])
def test_empty_or_malformed_span_is_rejected(start: int, end: int | None) -> None:
    for qrels in (lambda items: chunk_qrels(items, chunks_at([(0, 50)])), doc_qrels):
        with pytest.raises(RagexpInputError) as err:
            qrels(span_item(Evidence("d", start, end)))
        assert err.value.field == "evidence"
        assert "'q'" in err.value.message


def test_span_outside_every_chunk_is_rejected() -> None:
    text = "alpha beta     gamma"
    with pytest.raises(RagexpInputError, match="lies outside every chunk") as err:
        chunk_qrels(span_item(Evidence("d", 11, 14)), chunks_at([(0, 10), (15, 20)], text))
    assert err.value.field == "evidence"


def test_whitespace_trimmed_between_chunks_does_not_count_towards_the_span() -> None:
    # span "ab\n\ncd" across a paragraph break: each chunk holds 2 of the 4 chunked characters
    text = "xxxxxxab\n\ncdxxxxxx"
    chunks = chunks_at([(0, 8), (10, 18)], text)
    assert relevant(chunks, Evidence("d", 6, 12)) == {"d#chunk_0": 1, "d#chunk_1": 1}


def test_bound_of_the_invariant_is_tight() -> None:
    """Above 0.5 a span split evenly between two chunks is lost: the invariant needs <= 0.5."""
    chunks = chunks_at([(0, 50), (50, 100)])
    assert relevant(chunks, Evidence("d", 40, 60), rule=OverlapRule(min_fraction=0.51)) == {}


# ---------------------------------------------------------------- grades and document evidence


def test_chunk_grade_is_the_maximum_grade_of_matched_evidence() -> None:
    chunks = chunks_at([(0, 50), (50, 100)])
    assert relevant(chunks, Evidence("d", 10, 20, grade=2), Evidence("d", 40, 60, grade=1)) == {
        "d#chunk_0": 2, "d#chunk_1": 1,
    }


def test_grade_zero_evidence_gives_judged_non_relevant_entries() -> None:
    chunks = chunks_at([(0, 50), (50, 100)])
    assert relevant(chunks, Evidence("d", 10, 20, grade=0)) == {"d#chunk_0": 0}
    assert relevant(chunks, Evidence("d", 10, 20, grade=0), Evidence("d", 15, 30, grade=3)) == {"d#chunk_0": 3}


def test_document_evidence_marks_every_chunk_of_its_document() -> None:
    by_doc = chunks_at([(0, 50), (50, 100)]) | chunks_at([(0, 10)], doc_id="other")
    assert relevant(by_doc, Evidence("d", grade=2)) == {"d#chunk_0": 2, "d#chunk_1": 2}


def test_evidence_in_a_document_without_chunks_is_kept_at_document_level_only() -> None:
    items = span_item(Evidence("empty"), Evidence("d", 0, 5))
    assert chunk_qrels(items, chunks_at([(0, 50)]) | {"empty": []}) == {"q": {"d#chunk_0": 1}}
    assert doc_qrels(items) == {"q": {"empty": 1, "d": 1}}


def test_doc_qrels_take_the_maximum_grade_per_document() -> None:
    items = [
        EvalItem("q1", "?", (Evidence("a", 0, 4, grade=1), Evidence("a", grade=2), Evidence("b", 3, 9, grade=0))),
        EvalItem("q2", "?", (), answerable=False),
    ]
    assert doc_qrels(items) == {"q1": {"a": 2, "b": 0}, "q2": {}}


def test_duplicate_item_ids_are_rejected() -> None:
    items = span_item(Evidence("d", 0, 5)) * 2
    with pytest.raises(RagexpInputError, match="duplicate eval item id 'q'"):
        doc_qrels(items)


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"min_fraction": 0}, "eval.relevance.min_fraction"),
        ({"min_fraction": 1.5}, "eval.relevance.min_fraction"),
        ({"min_fraction": "half"}, "eval.relevance.min_fraction"),
        ({"mode": "both"}, "eval.relevance.mode"),
    ],
)
def test_bad_rule_settings_name_the_field(cfg: dict, field: str) -> None:
    with pytest.raises(RagexpInputError) as err:
        OverlapRule(**cfg)
    assert err.value.field == field


def test_rule_to_dict() -> None:
    assert OverlapRule(0.25, "span").to_dict() == {"min_fraction": 0.25, "mode": "span"}


# ---------------------------------------------------------------- properties


@st.composite
def evidence_spans(draw: st.DrawFn, text: str) -> tuple[int, int]:
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    assume(text[start:end].strip())
    return start, end


@st.composite
def arbitrary_chunkings(draw: st.DrawFn, length: int) -> GivenSpans:
    """Cut points tiling the text, each window stretched back by a random overlap (starts kept in order)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(length - 1, 1)), max_size=12)) - {length})
    bounds = [0, *cuts, length]
    spans = [(0, bounds[1])]
    for start, end in zip(bounds[1:], bounds[2:]):
        spans.append((max(spans[-1][0], start - draw(st.integers(0, 15))), end))
    return GivenSpans(tuple(spans))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(
    text=TEXTS.filter(str.strip),
    chunking=st.one_of(chunker_configs().map(make_chunker), st.just(None)),
    min_fraction=st.floats(0.01, 0.5),
    data=st.data(),
)
def test_no_span_is_lost_by_any_covering_chunking(
    text: str, chunking: Chunker | None, min_fraction: float, data: st.DataObject
) -> None:
    chunker = chunking or data.draw(arbitrary_chunkings(len(text)))
    doc = Document("d", text)
    start, end = data.draw(evidence_spans(text))
    qrels = chunk_qrels(span_item(Evidence("d", start, end)), {"d": chunker.chunk(doc)}, OverlapRule(min_fraction))
    assert qrels["q"], f"span {text[start:end]!r} lost under {chunker}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(texts=st.lists(TEXTS.filter(str.strip), min_size=1, max_size=4), cfg=chunker_configs(), data=st.data())
def test_chunk_qrels_collapse_to_doc_qrels_for_every_chunking(texts: list[str], cfg: dict, data: st.DataObject) -> None:
    docs = [Document(f"doc{i}", text) for i, text in enumerate(texts)]
    items = []
    for q in range(3):
        evidence = []
        for _ in range(data.draw(st.integers(0, 3))):
            doc = data.draw(st.sampled_from(docs))
            grade = data.draw(st.integers(0, 3))
            if data.draw(st.booleans()):
                evidence.append(Evidence(doc.id, grade=grade))
            else:
                evidence.append(Evidence(doc.id, *data.draw(evidence_spans(doc.text)), grade=grade))
        items.append(EvalItem(f"q{q}", "?", tuple(evidence)))
    chunker = make_chunker(cfg)
    whole = make_chunker({"name": "none"})
    for chunking in (chunker, whole):
        chunks_by_doc = {doc.id: chunking.chunk(doc) for doc in docs}
        collapsed: dict[str, dict[str, int]] = {}
        for qid, grades in chunk_qrels(items, chunks_by_doc).items():
            collapsed[qid] = {}
            for cid, grade in grades.items():
                doc_id = cid.rpartition("#chunk_")[0]
                collapsed[qid][doc_id] = max(grade, collapsed[qid].get(doc_id, -1))
        assert collapsed == doc_qrels(items)
    whole_qrels = chunk_qrels(items, {doc.id: whole.chunk(doc) for doc in docs})
    assert whole_qrels == {
        qid: {chunk_id(doc_id, 0): grade for doc_id, grade in grades.items()}
        for qid, grades in doc_qrels(items).items()
    }


# ---------------------------------------------------------------- BEIR


def test_whole_document_chunking_reproduces_beir_qrels(shared_data: Path) -> None:
    folder = shared_data / "scifact"
    with open(folder / "corpus.jsonl", encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle]
    beir: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            beir.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    items = [
        EvalItem(qid, "?", tuple(Evidence(doc_id, grade=grade) for doc_id, grade in grades.items()))
        for qid, grades in beir.items()
    ]
    chunker = make_chunker({"name": "none"})
    chunks_by_doc = {d["_id"]: chunker.chunk(Document(d["_id"], d["text"], d["title"])) for d in docs}
    qrels = chunk_qrels(items, chunks_by_doc)
    by_doc = {qid: {cid.removesuffix("#chunk_0"): g for cid, g in grades.items()} for qid, grades in qrels.items()}
    assert all(cid.endswith("#chunk_0") for grades in qrels.values() for cid in grades)
    assert by_doc == beir
    assert doc_qrels(items) == beir
