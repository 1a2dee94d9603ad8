"""The sweep parent's description fits MLflow's tag limit: rows that do not fit are counted, not cut."""

from __future__ import annotations

from ragexp.tracking import store
from ragexp.tracking.sweep_summary import ChildRun, best_by_metric, describe

METRICS = ["hit_rate_at_5", "mrr_at_10", "ndcg_at_10", "recall_at_10"]


def children(n: int) -> list[ChildRun]:
    return [ChildRun(run_id=f"{i:032x}", name=f"chunking-{i} · dense · rerank=embedding · ks=5,10,20",
                     axis_values={"chunking": f"c{i}", "retrieval": "dense"},
                     metrics={m: 0.5 + i / 1000 for m in METRICS}, params={}) for i in range(n)]


def note(n: int) -> str:
    runs = children(n)
    return describe(runs, ["chunking", "retrieval"], METRICS, best_by_metric(runs, METRICS), "p" * 32, "1", None)


def test_a_small_sweep_lists_every_run():
    text = note(6)
    assert len(text) <= store.DESCRIPTION_LIMIT
    assert all(f"chunking-{i} ·" in text for i in range(6)) and "more runs" not in text


def test_a_large_sweep_keeps_the_best_rows_and_counts_the_rest():
    text = note(120)
    assert len(text) <= store.DESCRIPTION_LIMIT
    assert text.endswith("compare.html).")  # the footer survives: nothing was cut by MLflow
    listed = sum(f"[chunking-{i} ·" in text for i in range(120))
    assert 10 < listed < 120
    assert f"… {120 - listed} more runs (below these) in `summary/compare.md`" in text
    assert "[chunking-119 ·" in text  # the best run (highest values) comes first
