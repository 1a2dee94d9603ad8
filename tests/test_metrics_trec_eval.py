"""ragexp.metrics equals trec_eval (pytrec_eval) on every metric of every query, to 1e-9.

Runs are random (seeded numpy and hypothesis) with many score ties, graded qrels with 0 and
negative grades, empty rankings, rankings shorter than k, queries only in the run and queries
only in the qrels, at trec_eval's default relevance level and at levels 2 and 3 (``-l``); plus a
SciFact-sized pseudo-run from the shared data.
"""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragexp.metrics._matrix
from ragexp.errors import RagexpInputError
from ragexp.metrics import (
    Qrels,
    doc_level,
    document_id,
    evaluate_run,
    metric_names,
    trec_order,
)

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = [1, 2, 3, 5, 10, 20]
TOLERANCE = 1e-9
TREC_MEASURE = {"recall_at": "recall", "hit_rate_at": "success", "context_precision_at": "P", "ndcg_at": "ndcg_cut"}
REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RAGEXP_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def gold_queries(run, qrels, level: int = 1) -> list[str]:
    """Queries trec_eval can score: a relevant unit (grade >= ``level``) in the qrels."""
    return [qid for qid in {**run, **qrels} if any(grade >= level for grade in qrels.get(qid, {}).values())]


def trec_eval_reference(run, qrels, ks, prefix: str = "", level: int = 1) -> dict[str, dict[str, float]]:
    """Every metric of evaluate_run, computed by pytrec_eval with ``relevance_level=level`` for the
    queries with gold at that level.

    A query missing from the run is given an empty ranking (trec_eval -c). ``mrr_at_k`` is
    recip_rank of the run cut to its top k in trec order.
    """
    scored = gold_queries(run, qrels, level)
    trec_qrels = {qid: dict(qrels[qid]) for qid in scored}
    cutoffs = ",".join(map(str, ks))
    measures = {f"{measure}.{cutoffs}" for measure in TREC_MEASURE.values()} | {"recip_rank"}
    results = pytrec_eval.RelevanceEvaluator(trec_qrels, measures, relevance_level=level).evaluate(
        {qid: dict(run.get(qid, [])) for qid in scored}
    )
    reference = {qid: {f"{prefix}mrr": results[qid]["recip_rank"]} for qid in scored}
    for k in ks:
        top_k = {qid: dict(trec_order(run.get(qid, []))[:k]) for qid in scored}
        reciprocal_rank_at_k = pytrec_eval.RelevanceEvaluator(trec_qrels, {"recip_rank"}, relevance_level=level).evaluate(top_k)
        for qid in scored:
            reference[qid][f"{prefix}mrr_at_{k}"] = reciprocal_rank_at_k[qid]["recip_rank"]
            for ours, theirs in TREC_MEASURE.items():
                reference[qid][f"{prefix}{ours}_{k}"] = results[qid][f"{theirs}_{k}"]
    return reference


def assert_equals_trec_eval(run, qrels, ks, doc: bool = False, level: int = 1) -> None:
    prefix = "doc_" if doc else ""
    evaluation = evaluate_run(run, Qrels(qrels, relevance_level=level), ks, doc=doc)
    reference = trec_eval_reference(run, qrels, ks, prefix, level)
    assert set(evaluation.per_query) == set(reference)
    for qid, expected in reference.items():
        assert set(evaluation.per_query[qid]) == set(expected) == set(metric_names(sorted(set(ks)), doc))
        for name, value in expected.items():
            assert evaluation.per_query[qid][name] == pytest.approx(value, abs=TOLERANCE), (qid, name)
    for name in metric_names(sorted(set(ks)), doc):
        expected_mean = np.mean([metrics[name] for metrics in reference.values()]) if reference else np.nan
        assert evaluation.aggregate[name] == pytest.approx(expected_mean, abs=TOLERANCE, nan_ok=True), name
    assert evaluation.aggregate[f"{prefix}n_queries"] == len(reference)
    assert sorted(evaluation.no_gold) == sorted((set(run) | set(qrels)) - set(reference))
    assert evaluation.aggregate[f"{prefix}n_queries_no_gold"] == len(evaluation.no_gold)


def random_case(seed: int, n_queries: int = 40, max_depth: int = 30):
    """A run in random order with few distinct scores, and graded qrels (-1..3) over a shared pool."""
    rng = np.random.default_rng(seed)
    pool = [f"doc{d}#chunk_{c}" for d in range(15) for c in range(4)] + ["plain", "Plain", "é-doc", "doc1"]
    pool = pool + [f"extra{i}" for i in range(max(0, max_depth - len(pool)))]
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        units = rng.choice(pool, size=rng.integers(0, max_depth + 1), replace=False).tolist()
        if q % 7 != 3:  # some queries are only in the qrels
            run[qid] = list(zip(units, (rng.integers(0, 6, size=len(units)) / 4).tolist()))
        if q % 11 != 5:  # some only in the run
            judged = rng.choice(pool, size=rng.integers(0, 9), replace=False).tolist()
            qrels[qid] = dict(zip(judged, rng.integers(-1, 4, size=len(judged)).tolist()))
    return run, qrels


@pytest.mark.parametrize("seed", range(12))
def test_every_metric_of_every_query_equals_trec_eval(seed):
    run, qrels = random_case(seed)
    assert_equals_trec_eval(run, qrels, KS)


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_a_higher_relevance_level_equals_trec_eval_at_that_level(seed, level):
    """Grades -1..3 judged at ``-l 2`` / ``-l 3``: recall, P, success and recip_rank count only
    grades >= level, queries without such a grade are no_gold, nDCG keeps every grade as gain;
    and the level changes the numbers (it is honoured, not just stored)."""
    run, qrels = random_case(seed)
    assert_equals_trec_eval(run, qrels, KS, level=level)
    at_default, at_level = evaluate_run(run, Qrels(qrels), KS), evaluate_run(run, Qrels(qrels, level), KS)
    assert at_level.aggregate["recall_at_20"] != at_default.aggregate["recall_at_20"]
    assert at_level.aggregate["n_queries"] < at_default.aggregate["n_queries"]
    for qid in at_level.per_query:
        assert at_level.per_query[qid]["ndcg_at_10"] == at_default.per_query[qid]["ndcg_at_10"]


def test_rankings_longer_than_the_zip_transpose_limit_equal_trec_eval():
    run, qrels = random_case(seed=99, n_queries=12, max_depth=700)
    assert max(map(len, run.values())) > 512
    assert_equals_trec_eval(run, qrels, [1, 10, 100, 600, 1000])


def test_graded_units_compared_in_small_blocks_equal_trec_eval(monkeypatch):
    monkeypatch.setattr(ragexp.metrics._matrix, "_COMPARISONS_PER_BLOCK", 50)  # 1-2 units per block
    run, qrels = random_case(seed=7)
    assert_equals_trec_eval(run, qrels, KS)


def test_input_order_of_a_ranking_does_not_matter():
    run, qrels = random_case(seed=5)
    rng = np.random.default_rng(0)
    shuffled = {qid: [ranking[i] for i in rng.permutation(len(ranking))] for qid, ranking in run.items()}
    ordered = {qid: trec_order(ranking) for qid, ranking in run.items()}
    assert evaluate_run(shuffled, Qrels(qrels), KS) == evaluate_run(ordered, Qrels(qrels), KS)


unit_ids = st.sampled_from(["a", "b", "B", "c", "d#chunk_0", "d#chunk_1", "ü", "e"])


@st.composite
def run_and_qrels(draw):
    queries = draw(st.lists(st.sampled_from(["q1", "q2", "q3", "q4"]), unique=True, max_size=4))
    run = {
        qid: list(draw(st.dictionaries(unit_ids, st.sampled_from([0.0, 0.5, 1.0, -2.0, 3.25]), max_size=8)).items())
        for qid in queries
        if draw(st.booleans())
    }
    qrels = {qid: draw(st.dictionaries(unit_ids, st.integers(-1, 3), max_size=6)) for qid in queries if draw(st.booleans())}
    return run, qrels


@settings(max_examples=200, deadline=None)
@given(case=run_and_qrels(), ks=st.lists(st.integers(1, 10), min_size=1, max_size=4), level=st.integers(1, 3))
def test_random_small_runs_equal_trec_eval(case, ks, level):
    run, qrels = case
    assert_equals_trec_eval(run, qrels, ks, doc=True, level=level)


@pytest.mark.parametrize("level", [0, -1, 1.5, True, "2", None])
def test_a_relevance_level_is_an_integer_of_at_least_one(level):
    with pytest.raises(RagexpInputError, match="field 'relevance_level'"):
        Qrels({"q": {"a": 1}}, relevance_level=level)


def test_qrels_as_a_plain_mapping_are_refused():
    with pytest.raises(TypeError, match="Qrels"):
        evaluate_run({"q": [("a", 1.0)]}, {"q": {"a": 1}}, [1])


def test_first_relevant_rank_is_the_trec_order_rank_of_the_first_relevant_unit():
    run, qrels = random_case(seed=3)
    evaluation = evaluate_run(run, Qrels(qrels), [5])
    for qid in evaluation.per_query:
        grades = [qrels[qid].get(unit, 0) for unit, _ in trec_order(run.get(qid, []))]
        expected = next((rank for rank, grade in enumerate(grades, start=1) if grade >= 1), None)
        assert evaluation.first_relevant_rank[qid] == expected
    assert set(evaluation.first_relevant_rank) == set(evaluation.per_query)


def test_query_without_run_scores_zero_and_counts_in_the_means():
    qrels = {"answered": {"a": 1}, "missing": {"b": 2}, "no_gold": {"c": 0}}
    evaluation = evaluate_run({"answered": [("a", 1.0)], "not_judged": [("a", 1.0)]}, Qrels(qrels), [1])
    assert set(evaluation.per_query["missing"].values()) == {0.0}
    assert evaluation.aggregate["mrr"] == 0.5
    assert evaluation.first_relevant_rank == {"answered": 1, "missing": None}
    assert evaluation.no_gold == ["not_judged", "no_gold"]
    assert (evaluation.aggregate["n_queries"], evaluation.aggregate["n_queries_no_gold"]) == (2, 2)


def test_precision_divides_by_k_even_when_fewer_units_were_retrieved():
    evaluation = evaluate_run({"q": [("a", 1.0), ("b", 0.5)]}, Qrels({"q": {"a": 1, "b": 1}}), [5])
    assert evaluation.per_query["q"]["context_precision_at_5"] == pytest.approx(2 / 5)
    assert evaluation.per_query["q"]["recall_at_5"] == 1.0


def test_trec_order_sorts_by_score_then_id_descending_in_code_point_order():
    ranking = [("a", 1.0), ("c", 1.0), ("b", 2.0), ("B", 1.0), ("é", 1.0)]
    assert trec_order(ranking) == [("b", 2.0), ("é", 1.0), ("c", 1.0), ("a", 1.0), ("B", 1.0)]


def test_a_unit_ranked_twice_is_rejected():
    with pytest.raises(RagexpInputError, match=r"query 'q2' ranks unit 'a' twice"):
        evaluate_run({"q1": [("a", 1.0)], "q2": [("a", 1.0), ("b", 0.5), ("a", 0.2)]}, Qrels({"q2": {"a": 1}}), [1])


def test_a_nan_score_is_rejected():
    with pytest.raises(RagexpInputError, match=r"query 'q' has a NaN score"):
        evaluate_run({"q": [("a", 1.0), ("b", float("nan"))]}, Qrels({"q": {"a": 1}}), [1])


@pytest.mark.parametrize("ks", [[], [0], [3, -1], [2.5], [True]])
def test_cutoffs_must_be_integers_of_at_least_one(ks):
    with pytest.raises(RagexpInputError, match="field 'ks'"):
        evaluate_run({"q": [("a", 1.0)]}, Qrels({"q": {"a": 1}}), ks)


def test_no_scorable_query_gives_nan_means():
    evaluation = evaluate_run({"q": [("a", 1.0)]}, Qrels({"q": {"a": 0}}), [1])
    assert np.isnan(evaluation.aggregate["mrr"]) and evaluation.per_query == {}
    assert evaluation.no_gold == ["q"]


def test_document_id_strips_the_chunk_suffix_only():
    assert document_id("doc_112#chunk_4") == "doc_112"
    assert document_id("doc_112") == "doc_112"
    assert document_id("a#chunk_1#chunk_2") == "a#chunk_1"


def best_chunk_per_document(ranking) -> dict[str, float]:
    best: dict[str, float] = defaultdict(lambda: float("-inf"))
    for unit_id, score in ranking:
        doc_id = unit_id.split("#chunk_")[0]
        best[doc_id] = max(best[doc_id], score)
    return dict(best)


@pytest.mark.parametrize("seed", range(5))
def test_doc_level_scores_a_document_by_its_best_chunk_and_equals_trec_eval(seed):
    chunk_run, _ = random_case(seed)
    rng = np.random.default_rng(seed)
    documents = sorted({unit.split("#chunk_")[0] for ranking in chunk_run.values() for unit, _ in ranking})
    doc_qrels = {
        qid: dict(zip(rng.choice(documents, size=3, replace=False).tolist(), rng.integers(0, 3, size=3).tolist()))
        for qid in chunk_run
    }
    doc_run = {qid: doc_level(ranking) for qid, ranking in chunk_run.items()}
    for qid, ranking in chunk_run.items():
        assert dict(doc_run[qid]) == best_chunk_per_document(ranking)
        assert doc_run[qid] == trec_order(doc_run[qid])
    collapsed = {qid: list(best_chunk_per_document(ranking).items()) for qid, ranking in chunk_run.items()}
    evaluation = evaluate_run(doc_run, Qrels(doc_qrels), KS, doc=True)
    reference = trec_eval_reference(collapsed, doc_qrels, KS, prefix="doc_")
    assert reference and set(evaluation.per_query) == set(reference)
    for qid, expected in reference.items():
        for name, value in expected.items():
            assert evaluation.per_query[qid][name] == pytest.approx(value, abs=TOLERANCE), (qid, name)


def load_scifact_test_qrels(root: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (root / "qrels" / "test.tsv").open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels[row["query-id"]][row["corpus-id"]] = int(row["score"])
    return dict(qrels)


@pytest.mark.skipif(not (SHARED_DATA / "scifact").is_dir(), reason=f"SciFact not found under {SHARED_DATA}")
def test_scifact_sized_pseudo_run_equals_trec_eval():
    root = SHARED_DATA / "scifact"
    qrels = load_scifact_test_qrels(root)
    with (root / "corpus.jsonl").open() as handle:
        corpus_ids = [json.loads(line)["_id"] for line in handle]
    assert (len(qrels), len(corpus_ids)) == (300, 5183)
    rng = np.random.default_rng(2024)
    run = {}
    for qid, judged in qrels.items():
        relevant = [doc for doc in judged if rng.random() < 0.8]  # some gold is never retrieved
        others = [doc for doc in rng.choice(corpus_ids, size=120, replace=False).tolist() if doc not in judged]
        units = relevant + others[: 100 - len(relevant)]
        run[qid] = list(zip(units, (rng.integers(0, 40, size=len(units)) / 8).tolist()))  # ties
    assert_equals_trec_eval(run, qrels, [1, 3, 5, 10, 100])
