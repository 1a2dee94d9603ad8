"""Failure classes: the truth table of ragexp.judging.failure, row by row."""

from __future__ import annotations

import pytest

from ragexp.judging.failure import (
    FailureClass,
    FailureThresholds,
    classify,
    failure_rates,
    gold_in_context,
)

OK, RET, GEN = FailureClass.OK, FailureClass.RETRIEVAL_FAILURE, FailureClass.GENERATION_FAILURE
UOK, HAL = FailureClass.UNANSWERABLE_OK, FailureClass.HALLUCINATED
ERR = FailureClass.GENERATION_ERROR


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # answerable: gold missing from the context -> retrieval failure, whatever the answer
        (dict(gold_in_context=False, refused=False, f1=1.0, faithfulness=1.0), RET),
        (dict(gold_in_context=False, refused=True), RET),
        (dict(gold_in_context=False, refused=False, f1=0.0, faithfulness=0.0), RET),
        # gold in context
        (dict(gold_in_context=True, refused=False, f1=0.9, faithfulness=1.0), OK),
        (dict(gold_in_context=True, refused=False, f1=0.5, faithfulness=0.5), OK),  # thresholds are inclusive
        (dict(gold_in_context=True, refused=False, f1=0.49, faithfulness=1.0), GEN),  # incorrect
        (dict(gold_in_context=True, refused=False, f1=1.0, faithfulness=0.49), GEN),  # unfaithful
        (dict(gold_in_context=True, refused=True, f1=0.0), GEN),  # refused although the answer was there
        (dict(gold_in_context=True, refused=False, f1=1.0, faithfulness=None), OK),  # undefined faithfulness
        # key facts take precedence over F1 when the item has them
        (dict(gold_in_context=True, refused=False, f1=0.1, key_fact_recall=1.0, faithfulness=1.0), OK),
        (dict(gold_in_context=True, refused=False, f1=1.0, key_fact_recall=0.0, faithfulness=1.0), GEN),
        # no gold answer and no key facts: only faithfulness can fail the generation
        (dict(gold_in_context=True, refused=False, faithfulness=1.0), OK),
        (dict(gold_in_context=True, refused=False, faithfulness=0.0), GEN),
        # item without evidence: gold presence unknown, classified on the answer alone
        (dict(gold_in_context=None, refused=False, f1=1.0, faithfulness=1.0), OK),
        (dict(gold_in_context=None, refused=False, f1=0.0, faithfulness=1.0), GEN),
    ],
)
def test_answerable_truth_table(case, expected):
    assert classify(answerable=True, **case) is expected


@pytest.mark.parametrize(
    ("refused", "gold", "expected"), [(True, None, UOK), (True, True, UOK), (False, None, HAL), (False, False, HAL)]
)
def test_unanswerable_truth_table(refused, gold, expected):
    assert classify(answerable=False, refused=refused, gold_in_context=gold, f1=1.0, faithfulness=1.0) is expected


def test_thresholds_are_configurable():
    strict = FailureThresholds(min_f1=0.95, min_key_fact_recall=1.0, min_faithfulness=1.0)
    assert classify(answerable=True, refused=False, gold_in_context=True, f1=0.9, thresholds=strict) is GEN
    assert classify(answerable=True, refused=False, gold_in_context=True, key_fact_recall=0.5, thresholds=strict) is GEN
    assert classify(answerable=True, refused=False, gold_in_context=True, f1=1.0, faithfulness=0.9, thresholds=strict) is GEN
    assert classify(answerable=True, refused=False, gold_in_context=True, f1=1.0, faithfulness=1.0, thresholds=strict) is OK


def test_gold_in_context_uses_graded_chunk_qrels():
    relevant = {"webhooks/retries#chunk_2": 1, "webhooks/faq#chunk_0": 0}
    assert gold_in_context(["a#chunk_0", "webhooks/retries#chunk_2"], relevant) is True
    assert gold_in_context(["webhooks/faq#chunk_0"], relevant) is False  # judged non-relevant
    assert gold_in_context([], relevant) is False
    assert gold_in_context(["a#chunk_0"], {}) is None


@pytest.mark.parametrize("answerable", [True, False])
def test_a_failed_generator_call_is_a_generation_error_first(answerable):
    # an empty answer from a failed call must not count as a refusal (a correct one when unanswerable)
    assert classify(answerable=answerable, refused=True, gold_in_context=True, generation_failed=True) is ERR


def test_generation_errors_are_left_out_of_the_class_rates():
    rates = failure_rates([OK, RET, ERR, ERR, UOK, ERR])
    assert rates["ok_rate"] == 0.5 and rates["retrieval_failure_rate"] == 0.5 and rates["unanswerable_ok_rate"] == 1.0
    assert rates["n_generation_error"] == 3.0 and rates["generation_error_rate"] == 0.5


def test_rates_are_per_item_kind():
    classes = [OK, OK, RET, GEN, UOK, HAL, HAL, HAL]
    rates = failure_rates(classes)
    assert rates["ok_rate"] == 0.5 and rates["retrieval_failure_rate"] == 0.25 and rates["generation_failure_rate"] == 0.25
    assert rates["unanswerable_ok_rate"] == 0.25 and rates["hallucinated_rate"] == 0.75
    assert rates["n_hallucinated"] == 3.0 and rates["n_ok"] == 2.0
    answerable_only = failure_rates(["ok", "retrieval_failure"])
    assert "hallucinated_rate" not in answerable_only and answerable_only["n_hallucinated"] == 0.0
