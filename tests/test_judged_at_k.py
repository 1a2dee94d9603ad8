"""judged@k against a hand computation on a known pool and against ir_measures' Judged@k."""

from __future__ import annotations

import random

import pytest

from ragexp.datamodel import Chunk, EvalItem, Evidence
from ragexp.metrics.judged import judged_at_k, judged_metrics
from ragexp.metrics.relevance import chunk_qrels
from ragexp.tracking.metric_names import from_mlflow, to_mlflow

ir_measures = pytest.importorskip("ir_measures")


def test_hand_computation_on_a_known_pool():
    # One document in four 10-character chunks; the item has a positive span in chunk 1 and a
    # judged-negative (grade 0) span over chunk 3: the judged pool is {c1, c3}.
    chunks = [Chunk(f"d#chunk_{i}", "d", i, 10 * i, 10 * i + 10, "x" * 10) for i in range(4)]
    item = EvalItem("q", "?", evidence=(Evidence("d", 12, 18, grade=1), Evidence("d", 30, 40, grade=0)))
    qrels = chunk_qrels([item], {"d": chunks})
    assert qrels == {"q": {"d#chunk_1": 1, "d#chunk_3": 0}}
    ranking = [("d#chunk_0", 4.0), ("d#chunk_1", 3.0), ("d#chunk_2", 2.0), ("d#chunk_3", 1.0)]
    # top-1 {c0}: 0/1; top-2 {c0,c1}: 1/2; top-3: 1/3; top-4: 2/4; k=10 -> min(10, 4) = 4: 2/4
    assert [judged_at_k(ranking, qrels["q"], k) for k in (1, 2, 3, 4, 10)] == [0.0, 0.5, 1 / 3, 0.5, 0.5]
    assert judged_at_k(ranking[:1], qrels["q"], 5) == 0.0  # denominator min(k, retrieved) = 1
    assert judged_at_k([], qrels["q"], 5) is None
    per_query, aggregate = judged_metrics({"q": ranking, "unjudged": ranking[:2], "empty": []},
                                          {**qrels, "unjudged": {}}, [2, 4])
    assert per_query == {"q": {"judged_at_2": 0.5, "judged_at_4": 0.5},
                         "unjudged": {"judged_at_2": 0.0, "judged_at_4": 0.0}}
    assert aggregate == {"judged_at_2": 0.25, "judged_at_4": 0.25}


def test_equals_ir_measures_judged_at_k():
    rng = random.Random(7)
    run, qrels = {}, {}
    for q in range(40):
        units = [f"u{i}" for i in range(30)]
        depth = rng.choice([0, 1, 3, 7, 12, 20])  # rankings shorter than k included
        scores = rng.sample(range(1000), depth)  # distinct scores: both libraries order ties differently
        run[f"q{q}"] = [(u, float(s)) for u, s in zip(rng.sample(units, depth), scores)]
        qrels[f"q{q}"] = {u: rng.choice([0, 1, 2]) for u in rng.sample(units, rng.randint(1, 12))}
    ks = [1, 5, 10]
    per_query, _ = judged_metrics(run, qrels, ks)
    measures = [ir_measures.Judged @ k for k in ks]
    theirs = {}
    nonempty = {q: dict(r) for q, r in run.items() if r}  # ir_measures divides by 0 on an empty ranking
    ir_qrels = [ir_measures.Qrel(q, u, g) for q, grades in qrels.items() for u, g in grades.items()]
    for metric in ir_measures.iter_calc(measures, ir_qrels, nonempty):
        if metric.query_id in nonempty:  # ir_measures also reports queries missing from the run
            theirs[(metric.query_id, str(metric.measure))] = metric.value
    ours = {(q, f"Judged@{name.rsplit('_', 1)[1]}"): v for q, row in per_query.items() for name, v in row.items()}
    assert sorted(ours) == sorted(theirs), (sorted(set(ours) ^ set(theirs)))[:5]
    assert len(ours) > 60
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key


def test_logged_under_retrieval():
    assert to_mlflow("judged_at_5") == "retrieval/judged_at_5" and from_mlflow("retrieval/judged_at_5") == "judged_at_5"


def test_the_run_mean_is_ir_measures_judged_with_trec_ties_and_unjudged_queries_as_0():
    """What ``judged_at_k`` is, exactly, on a run with tied scores and queries nobody judged: per
    query, ir_measures' ``Judged@k`` of the ranking in trec_eval's order (ties by unit id
    descending; ir_measures breaks them ascending), and the run's mean counts a query without
    qrels as 0 (ir_measures leaves it out). The raw ir_measures number differs on ties."""
    rng = random.Random(11)
    run, qrels = {}, {}
    for q in range(60):
        units = [f"u{i:02d}" for i in range(30)]
        depth = rng.choice([1, 3, 7, 12])
        run[f"q{q}"] = [(u, float(rng.choice([1, 2, 3]))) for u in rng.sample(units, depth)]  # many ties
        if q % 4:  # every fourth query has no judgment at all
            qrels[f"q{q}"] = {u: rng.choice([0, 1]) for u in rng.sample(units, rng.randint(1, 12))}
    k = 5
    _, aggregate = judged_metrics(run, qrels, [k])
    ir_qrels = [ir_measures.Qrel(q, u, g) for q, grades in qrels.items() for u, g in grades.items()]

    def ir_per_query(ranked):
        return {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.Judged @ k], ir_qrels, ranked)}

    # the same ranking, its trec_eval order written into the scores: ties no longer decide anything
    from ragexp.metrics.ranking import trec_order

    ordered = {q: {u: float(len(r) - i) for i, (u, _) in enumerate(trec_order(r))} for q, r in run.items()}
    exact = ir_per_query(ordered)
    assert set(exact) == set(qrels)  # ir_measures scores only the judged queries
    assert aggregate[f"judged_at_{k}"] == pytest.approx(sum(exact.values()) / len(run), abs=1e-12)
    raw = ir_per_query({q: dict(r) for q, r in run.items()})
    assert raw != exact  # its own tie order: another top k on tied queries
    assert sum(raw.values()) / len(raw) != pytest.approx(aggregate[f"judged_at_{k}"])
