"""SQuAD v1.1 correctness: ragexp's EM/F1 reproduce the official scorer.

The reference below re-implements the official ``evaluate-v1.1.py`` logic line by line in this
file (independently of ragexp), and the two published values (BERT ensemble, logistic regression
baseline) pin the absolute numbers.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from ragexp.judging.correctness import (
    compile_refusal_patterns,
    correctness_metrics,
    exact_match,
    exact_match_max,
    f1,
    f1_max,
    is_refusal,
    key_fact_recall,
    normalize_answer,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SQUAD_DIR = Path(os.environ.get("RAGEXP_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")) / "squad_v1.1_dev"
PREDICTIONS_DIR = SQUAD_DIR / "reference_predictions"
PUBLISHED = {  # official evaluate-v1.1.py output, as recorded in the data set's SOURCE.txt
    "BERT_(ensemble)_(Google_AI_Language).json": (86.206, 92.196),
    "Logistic_Regression_Baseline_(Stanford_University).json": (40.142, 50.982),
}

needs_squad = pytest.mark.skipif(
    not (SQUAD_DIR / "dev-v1.1.reconstructed.json").is_file(),
    reason=f"SQuAD v1.1 dev not found under {SQUAD_DIR} (set RAGEXP_SHARED_DATA)",
)


# --- the official evaluate-v1.1.py, re-implemented here as the oracle -------------------------
def _official_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _official_f1(prediction, ground_truth):
    prediction_tokens = _official_normalize(prediction).split()
    ground_truth_tokens = _official_normalize(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _official_em(prediction, ground_truth):
    return _official_normalize(prediction) == _official_normalize(ground_truth)


def _official_evaluate(dataset, predictions):
    f1_sum = em_sum = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                truths = [a["text"] for a in qa["answers"]]
                em_sum += max(_official_em(predictions[qa["id"]], t) for t in truths)
                f1_sum += max(_official_f1(predictions[qa["id"]], t) for t in truths)
    return {"exact_match": 100.0 * em_sum / total, "f1": 100.0 * f1_sum / total}


# --- ragexp's scorer over the same data ---------------------------------------------------------
def _ragexp_evaluate(dataset, predictions):
    em, f1_values = [], []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                prediction = predictions.get(qa["id"])
                golds = [a["text"] for a in qa["answers"]]
                em.append(0.0 if prediction is None else exact_match_max(prediction, golds))
                f1_values.append(0.0 if prediction is None else f1_max(prediction, golds))
    return {"exact_match": 100.0 * sum(em) / len(em), "f1": 100.0 * sum(f1_values) / len(f1_values)}


@pytest.fixture(scope="module")
def squad_dataset():
    with open(SQUAD_DIR / "dev-v1.1.reconstructed.json", encoding="utf-8") as handle:
        return json.load(handle)["data"]


@needs_squad
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_reproduces_published_squad_scores(squad_dataset, name):
    predictions = json.loads((PREDICTIONS_DIR / name).read_text(encoding="utf-8"))
    scores = _ragexp_evaluate(squad_dataset, predictions)
    expected_em, expected_f1 = PUBLISHED[name]
    assert round(scores["exact_match"], 3) == expected_em
    assert round(scores["f1"], 3) == expected_f1


@pytest.mark.slow
@needs_squad
def test_matches_official_logic_on_every_reference_prediction_file(squad_dataset):
    files = sorted(PREDICTIONS_DIR.glob("*.json"))
    assert len(files) == 5
    for path in files:
        predictions = json.loads(path.read_text(encoding="utf-8"))
        ours, official = _ragexp_evaluate(squad_dataset, predictions), _official_evaluate(squad_dataset, predictions)
        assert ours["exact_match"] == pytest.approx(official["exact_match"], abs=1e-9), path.name
        assert ours["f1"] == pytest.approx(official["f1"], abs=1e-9), path.name


def test_normalisation_edge_cases():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("theory") == "theory"  # articles only as whole words
    assert normalize_answer("") == ""
    assert exact_match("the Broncos.", "Broncos") == 1.0
    assert exact_match("Broncos fans", "Broncos") == 0.0


def test_f1_counts_token_multisets():
    assert f1("Denver Broncos", "Denver Broncos") == 1.0
    assert f1("", "Denver") == 0.0
    assert f1("Denver Denver", "Denver") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert f1_max("Carolina", ["Denver Broncos", "Carolina Panthers"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        f1_max("x", [])


def test_key_fact_recall_uses_token_boundaries():
    answer = "Webhooks retry with exponential backoff for 24 hours."
    assert key_fact_recall(answer, ["24 hours", "exponential backoff"]) == 1.0
    assert key_fact_recall("They retry for 124 hours", ["24 hours"]) == 0.0
    assert key_fact_recall(answer, ["24 hours", "48 hours"]) == 0.5
    assert key_fact_recall(answer, []) is None


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I don\u2019t know based on the documents.",
        "The context does not mention a refund policy for annual plans.",
        "This is not mentioned in the provided context.",
        "There is not enough information to answer.",
        "I cannot answer this from the documentation.",
        "   ",
    ],
)
def test_refusals_are_detected(answer):
    assert is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Webhooks retry for 24 hours.",
        "You cannot rotate a key without creating a new one first.",
        "The search endpoint allows 10 requests per second.",
    ],
)
def test_answers_are_not_refusals(answer):
    assert not is_refusal(answer)


def test_refusal_patterns_are_configurable():
    patterns = compile_refusal_patterns([r"\bkeine ahnung\b"])
    assert is_refusal("Keine Ahnung.", patterns)
    assert not is_refusal("I don't know.", patterns)


def test_correctness_metrics_omit_what_has_no_gold():
    assert correctness_metrics("24 hours", [], []) == {"refused": 0.0}
    metrics = correctness_metrics("For 24 hours", ["24 hours"], ["24 hours", "backoff"])
    assert metrics == {"refused": 0.0, "exact_match": 0.0, "f1": pytest.approx(0.8), "key_fact_recall": 0.5}
