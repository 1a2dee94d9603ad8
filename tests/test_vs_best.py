"""Ties with the best run: classification against scipy's exact paired permutation test with a
Bonferroni threshold computed here; the noise line's arithmetic; the per-query diff against a
hand computation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import permutation_test

from ragexp.comparison import per_query_diff as pqd
from ragexp.comparison import vs_best
from ragexp.evaluation.results import QueryResult, RunResults

N = 14
BEST = [1] * 13 + [0]


def losing(wins_for_best: int, wins_for_other: int = 0) -> list[int]:
    """A run equal to BEST except on ``wins_for_best`` queries it misses and ``wins_for_other`` it hits."""
    run = list(BEST)
    for i in range(wins_for_best):
        run[i] = 0
    if wins_for_other:
        run[13] = 1
    return run


RUNS = {"best": BEST, "eight": losing(8), "six": losing(6), "mixed": losing(4, 1), "same": list(BEST)}


def scipy_p(best, other) -> float:
    """Exact paired permutation test (all 2**14 sign assignments) of mean(best - other)."""
    result = permutation_test((np.array(best, float), np.array(other, float)), lambda x, y: np.mean(x - y),
                              permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    return float(result.pvalue)


def test_ties_match_an_exact_scipy_permutation_test_with_bonferroni():
    per_query = {run: {f"q{i:02d}": v for i, v in enumerate(values)} for run, values in RUNS.items()}
    standing = vs_best.classify(per_query)
    threshold = 0.05 / (len(RUNS) - 1)
    assert standing["best"].status == vs_best.BEST and standing["best"].n == N
    for run in ("eight", "six", "mixed", "same"):
        expected_p = scipy_p(RUNS["best"], RUNS[run])
        assert standing[run].p_value == pytest.approx(expected_p, abs=1e-12)
        assert standing[run].status == (vs_best.WORSE if expected_p < threshold else vs_best.TIED)
    # the constructed case needs the correction: "six" is significant alone (p = 2/64) but tied after Bonferroni
    assert scipy_p(RUNS["best"], RUNS["six"]) < 0.05
    assert [run for run, s in standing.items() if s.status == vs_best.WORSE] == ["eight"]
    assert vs_best.tie_set(standing) == ["best", "six", "mixed", "same"]


def test_lower_is_better_picks_the_smallest_mean_and_equal_means_keep_the_first():
    per_query = {"a": {"q1": 0.0, "q2": 1.0}, "b": {"q1": 1.0, "q2": 1.0}, "c": {"q1": 0.0, "q2": 1.0}}
    standing = vs_best.classify(per_query, lower_is_better=True)
    assert standing["a"].status == vs_best.BEST and standing["c"].status == vs_best.TIED


def test_runs_are_compared_on_their_common_queries_only():
    standing = vs_best.classify({"a": {"q1": 1.0, "q2": 1.0, "q3": 0.0}, "b": {"q2": 0.0, "q3": 0.0}})
    assert standing["a"].n == 2 and standing["a"].mean == 0.5 and standing["b"].mean == 0.0


def test_describe_ties_names_the_tie_set():
    standing = vs_best.classify({run: {f"q{i:02d}": v for i, v in enumerate(values)} for run, values in RUNS.items()})
    text = vs_best.describe_ties("hit rate@5", standing, {"best": "bm25"})
    assert text == "4 configs are indistinguishable on hit rate@5 at n=14: bm25, six, mixed, same"


def test_noise_line_is_the_gates_planning_tolerance():
    # 1.96 * sqrt(0.8 * 0.2 / 131) = 0.0685
    assert vs_best.minimum_detectable_difference(131, 0.8) == pytest.approx(1.96 * (0.16 / 131) ** 0.5)
    assert "at n=131 a hit-rate difference below ~0.068 is noise" in vs_best.noise_line(131, 0.8)
    assert vs_best.minimum_detectable_difference(50, 1.0) == pytest.approx(1 / 50)  # one query's worth


def results(rows, context_k=1) -> RunResults:
    """Rows given as (query_id, tags, ranking ids, relevant ids); hit_rate_at_2 from the ranking."""
    per_query = []
    for query_id, tags, ranking, relevant in rows:
        scored = [[unit, float(len(ranking) - i)] for i, unit in enumerate(ranking)]
        hit = float(any(unit in relevant for unit in ranking[:2]))
        per_query.append({"query_id": query_id, "query": f"question {query_id}", "tags": tags, "ranking": scored,
                          "relevant": {unit: 1 for unit in relevant}, "metrics": {"hit_rate_at_2": hit}})
    return RunResults(meta={"context_k": context_k}, aggregates={}, per_query=[QueryResult.from_dict(r) for r in per_query])


def test_per_query_diff_against_a_hand_computation():
    a = results([("q1", ["x"], ["d1", "d2", "d3"], {"d1"}),   # A rank 1 (hit)
                 ("q2", [], ["d2", "d3", "d1"], {"d1"}),      # A rank 3 (miss at 2)
                 ("q3", ["y"], ["d2", "d1", "d3"], {"d1"}),   # A rank 2 (hit)
                 ("q4", [], ["d1", "d2"], {"d1"}),            # same in both
                 ("q5", [], ["d3", "d2"], {"d1"})])           # A nothing relevant
    b = results([("q1", ["x"], ["d2", "d3", "d1"], {"d1"}),   # B rank 3: A hits, B misses
                 ("q2", [], ["d1", "d2"], {"d1"}),            # B rank 1: B hits, A misses
                 ("q3", ["y"], ["d1", "d2"], {"d1"}),         # both hit, rank 2 -> 1: rank moved
                 ("q4", [], ["d1", "d2"], {"d1"}),
                 ("q5", [], ["d3", "d2", "d4", "d1"], {"d1"})])  # both miss, none -> 4: rank moved
    diff = pqd.per_query_diff(a, b, k=2, a_label="run A", b_label="run B")
    got = [(s.query_id, s.kind, s.a_rank, s.b_rank, s.a_class, s.b_class) for s in diff.splits]
    assert got == [
        ("q1", pqd.A_ONLY, 1, 3, "ok", "retrieval_failure"),
        ("q2", pqd.B_ONLY, 3, 1, "retrieval_failure", "ok"),
        ("q5", pqd.RANK_MOVED, None, 4, "retrieval_failure", "retrieval_failure"),  # moved into the ranking: first
        ("q3", pqd.RANK_MOVED, 2, 1, "retrieval_failure", "ok"),
    ]
    assert diff.n_paired == 5 and diff.splits[0].tags == ["x"]
    text = pqd.format_text(diff)
    assert "5 paired queries at k=2: 1 A hits, B misses, 1 B hits, A misses, 2 rank moved" in text
    assert json.loads(diff.to_json())["counts"] == {pqd.A_ONLY: 1, pqd.B_ONLY: 1, pqd.RANK_MOVED: 2}
    assert "<td>q2</td><td>3</td><td>1</td>" in pqd.format_html(diff)
