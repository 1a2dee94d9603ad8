"""ragexp.metrics.evaluate_run against pytrec_eval (trec_eval) on the same synthetic run.

    python -m benchmarks.bench_metrics [--queries 10000] [--depth 100] [--repeats 5]

Times are CPU seconds (``time.process_time``: the machine may be shared), best of
``--repeats``, the two sides taking turns in this process. pytrec_eval's time counts
RelevanceEvaluator construction + evaluate on dict runs; ragexp's counts everything
evaluate_run does on list rankings (trec ordering, grade look-up, every metric, per-query dicts
and means). The run is timed best-first (as retrievers return it) and shuffled. Scores have 2
decimals, so ties (broken by unit id) are frequent. The last column checks the numbers agree.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import pytrec_eval

from ragexp.metrics import Qrels, evaluate_run, trec_order

KS = [1, 3, 5, 10, 100]
TREC_MEASURES = {
    f"{name}.{','.join(map(str, KS))}" for name in ("recall", "success", "P", "ndcg_cut")
} | {"recip_rank"}
TREC_NAMES = {"recall": "recall_at", "success": "hit_rate_at", "P": "context_precision_at", "ndcg_cut": "ndcg_at"}


def synthetic_run(n_queries: int, depth: int, seed: int = 0):
    """Best-first rankings of ``depth`` chunks and qrels with 3 retrieved + 2 unretrieved units, grades 0..3."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(n_queries):
        docs = rng.choice(50 * depth, size=depth, replace=False)
        chunks = rng.integers(0, 10, size=depth)
        scores = np.round(rng.random(depth), 2).tolist()
        ranking = [(f"doc{d}#chunk_{c}", s) for d, c, s in zip(docs.tolist(), chunks.tolist(), scores)]
        qid = f"q{q}"
        run[qid] = trec_order(ranking)
        judged = [ranking[i][0] for i in rng.choice(depth, size=min(3, depth), replace=False)]
        judged += [f"unretrieved{q}_{j}" for j in range(2)]
        qrels[qid] = dict(zip(judged, rng.integers(0, 4, size=len(judged)).tolist()))
    return run, qrels


def time_side_by_side(functions, repeats: int) -> list[tuple[float, object]]:
    """Best CPU seconds and last result of each function, run in turns ``repeats`` times."""
    best = [float("inf")] * len(functions)
    results: list[object] = [None] * len(functions)
    for _ in range(repeats):
        for i, function in enumerate(functions):
            gc.collect()  # neither side pays for collecting the other's (or the fixture's) garbage
            start = time.process_time()
            results[i] = function()
            best[i] = min(best[i], time.process_time() - start)
    return list(zip(best, results))


def max_difference(ours, theirs) -> float:
    worst = 0.0
    for qid, metrics in ours.per_query.items():
        reference = theirs[qid]
        worst = max(worst, abs(metrics["mrr"] - reference["recip_rank"]))
        for trec_name, our_name in TREC_NAMES.items():
            for k in KS:
                worst = max(worst, abs(metrics[f"{our_name}_{k}"] - reference[f"{trec_name}_{k}"]))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    run, qrels = synthetic_run(args.queries, args.depth)
    rng = np.random.default_rng(1)
    shuffled = {qid: [ranking[i] for i in rng.permutation(len(ranking))] for qid, ranking in run.items()}
    trec_run = {qid: dict(ranking) for qid, ranking in run.items()}

    print(f"{args.queries} queries x {args.depth} results, ks={KS}, best of {args.repeats}")
    print(f"{'input order':<12} {'pytrec_eval s':>14} {'ragexp s':>10} {'ragexp/pytrec':>14} {'max |diff|':>11}")
    for label, our_run in (("best-first", run), ("shuffled", shuffled)):
        (pytrec_seconds, theirs), (our_seconds, ours) = time_side_by_side(
            [
                lambda: pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(trec_run),
                lambda: evaluate_run(our_run, Qrels(qrels), KS),
            ],
            args.repeats,
        )
        ratio = our_seconds / pytrec_seconds
        difference = max_difference(ours, theirs)
        print(f"{label:<12} {pytrec_seconds:>14.3f} {our_seconds:>10.3f} {ratio:>14.2f} {difference:>11.1e}")


if __name__ == "__main__":
    main()
