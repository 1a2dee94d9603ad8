"""The measure identity (ragexp.metrics.measure): one parse of a metric key that compare, reproduce,
the gate and the MLflow logger share, checked against keys the runner writes."""

from __future__ import annotations

import pytest

from ragexp.comparison.gate import GateSpec
from ragexp.metrics.measure import CHUNK, DOC, GENERATION, HIGHER, LOWER, RUN, measure
from ragexp.tracking.metric_names import from_mlflow, to_mlflow


@pytest.mark.parametrize(("key", "name", "k", "level", "direction", "group", "bound"), [
    ("hit_rate_at_5", "hit_rate", 5, CHUNK, HIGHER, "", ""),
    ("doc_ndcg_at_10", "ndcg", 10, DOC, HIGHER, "", ""),
    ("mrr", "mrr", None, CHUNK, HIGHER, "", ""),
    ("context_hit_rate", "context_hit_rate", None, CHUNK, HIGHER, "", ""),
    ("judged_at_5", "judged", 5, CHUNK, HIGHER, "", ""),
    ("tag.synonym.mrr", "mrr", None, CHUNK, HIGHER, "tag.synonym", ""),
    ("source.draft.hit_rate_at_5", "hit_rate", 5, CHUNK, HIGHER, "source.draft", ""),
    ("recall_at_5_ci_low", "recall", 5, CHUNK, HIGHER, "", "ci_low"),
    ("faithfulness", "faithfulness", None, GENERATION, HIGHER, "", ""),
    ("retrieval_failure_rate", "retrieval_failure_rate", None, GENERATION, LOWER, "", ""),
    ("tag.t.hallucinated_rate", "hallucinated_rate", None, GENERATION, LOWER, "tag.t", ""),
    ("judge_failures", "judge_failures", None, GENERATION, LOWER, "", ""),
    ("time.retrieval_s", "time.retrieval_s", None, RUN, LOWER, "", ""),
    ("gen.latency_s", "gen.latency_s", None, GENERATION, LOWER, "", ""),
    ("gen.repeating_answers", "gen.repeating_answers", None, GENERATION, LOWER, "", ""),
    ("gen.length_capped", "gen.length_capped", None, GENERATION, LOWER, "", ""),
    ("retrieval_depth", "retrieval_depth", None, RUN, HIGHER, "", ""),
])
def test_a_key_names_one_measure(key, name, k, level, direction, group, bound):
    identity = measure(key)
    assert (identity.name, identity.k, identity.level, identity.direction, identity.group, identity.bound) == (
        name, k, level, direction, group, bound)


@pytest.mark.parametrize(("key", "mlflow_key"), [
    ("hit_rate_at_10", "retrieval/hit_rate_at_10"), ("doc_mrr", "doc/mrr"), ("refusal_accuracy", "generation/refusal_accuracy"),
    ("retrieval_depth", "other/retrieval_depth"), ("judged_at_5", "retrieval/judged_at_5"),
])
def test_the_mlflow_section_is_the_measures_level(key, mlflow_key):
    assert to_mlflow(key) == mlflow_key and from_mlflow(mlflow_key) == key


def test_the_gate_gates_a_lower_is_better_measure_downwards_unless_the_spec_says_otherwise():
    spec = GateSpec.from_mapping({"defaults": {"direction": "higher"},
                                  "metrics": {"retrieval_failure_rate": {}, "mrr": {}, "latency": {"direction": "lower"}}})
    assert {rule.metric: rule.direction for rule in spec.rules} == {
        "retrieval_failure_rate": "lower", "mrr": "higher", "latency": "lower"}
    assert [rule.direction for rule in spec.select(["generation_failure_rate", "f1"]).rules] == ["lower", "higher"]
