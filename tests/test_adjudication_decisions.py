"""Adjudication decides every dispute explicitly (issue #50): how an annotator's span lies against a
disputed passage is named by geometry (within, around, overlapping), a queued passage is decided
only by evidence over exactly it, and differing gold answers need one taken or typed.

The page's own walk through nested and answer-only disputes is tests/test_browser_adjudication.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.annotation.adjudication import decided, unsettled, verdict
from ragexp.datamodel import EvalItem, Evidence

LENGTH = 100


def _item(*spans: tuple[int, int, int]) -> EvalItem:
    return EvalItem("q", "?", tuple(Evidence("d", a, b, g) for a, b, g in spans))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, LENGTH - 1), st.integers(1, LENGTH), st.integers(0, LENGTH - 1), st.integers(1, LENGTH))
def test_a_span_is_named_by_how_it_lies_against_the_passage(a, b, s, e):
    start, end = min(a, b - 1), max(a + 1, b)
    s, e = min(s, e - 1), max(s + 1, e)
    got = verdict(_item((s, e, 1)), "d", start, end, LENGTH)
    if (s, e) == (start, end):
        expected = "span"
    elif e <= start or s >= end:
        expected = None  # no overlap: not judged
    elif start <= s and e <= end:
        expected = "within"
    elif s <= start and end <= e:
        expected = "around"
    else:
        expected = "overlap"
    assert got == ({"grade": 1, "how": expected} if expected else {"grade": None, "how": None}), (start, end, s, e)


def test_at_equal_grades_the_closest_relation_is_named():
    item = _item((10, 90, 1), (40, 50, 1))  # one span around the passage, one within it
    assert verdict(item, "d", 30, 60, LENGTH) == {"grade": 1, "how": "within"}
    assert verdict(_item((10, 90, 2), (40, 50, 1)), "d", 30, 60, LENGTH) == {"grade": 2, "how": "around"}


def _entry(units, evidence=(), **fields) -> dict:
    adjudication = {"names": ["alice", "bob"], "answerable": [True, True], "gold_answer": ["", ""],
                    "key_facts": [[], []], "tags": [[], []]} | fields.pop("adjudication", {})
    return {"id": "q", "query": "?", "evidence": list(evidence), **fields,
            "review": {"reason": "r", "units": [{"unit_id": f"d:{a}-{b}", "doc_id": "d", "start": a, "end": b} for a, b in units],
                       "adjudication": adjudication}}


def test_a_narrower_span_inside_decides_only_itself():
    wide, narrow = (0, 80), (20, 40)
    marked_narrow = [{"doc_id": "d", "start": 20, "end": 40, "quote": "x"}]
    assert decided({"doc_id": "d", "start": 20, "end": 40}, marked_narrow)
    assert not decided({"doc_id": "d", "start": 0, "end": 80}, marked_narrow)  # positive evidence inside is not a decision
    assert unsettled(_entry([wide, narrow], marked_narrow)).startswith("1 disputed passage(s) not judged yet")
    both = marked_narrow + [{"doc_id": "d", "start": 0, "end": 80, "quote": "y", "grade": 0}]
    assert unsettled(_entry([wide, narrow], both)) is None
    assert not decided({"doc_id": "d", "start": 0, "end": 80}, [{"doc_id": "d"}])  # whole-document evidence neither


def test_differing_gold_answers_need_one_taken_or_typed_unless_the_question_is_unanswerable():
    differ = {"gold_answer": ["24 hours", "For 24 hours."]}
    assert unsettled(_entry([], adjudication=differ)) == "the gold answers differ: take one (or type your own)"
    assert unsettled(_entry([], adjudication=differ, gold_answer="  ")) is not None
    assert unsettled(_entry([], adjudication=differ, gold_answer="24 hours")) is None
    assert unsettled(_entry([], adjudication=differ, gold_answer="About a day")) is None  # typed: a decision too
    assert unsettled(_entry([], adjudication=differ, answerable=False)) is None
    assert unsettled(_entry([])) is None
    assert unsettled({"id": "q", "query": "?", "review": {"reason": "r", "units": []}}) is None  # a run's queue, not adjudication


def test_disputed_answerability_is_decided_by_u_or_by_relevant_evidence():
    disputed = {"answerable": [True, False]}
    assert unsettled(_entry([], adjudication=disputed)).startswith("answerability is disputed")
    assert unsettled(_entry([], adjudication=disputed, answerable=False)) is None
    assert unsettled(_entry([], [{"doc_id": "d", "start": 1, "end": 2, "quote": "x"}], adjudication=disputed)) is None
