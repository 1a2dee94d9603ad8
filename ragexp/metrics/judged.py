"""Judged@k: how much of a run's top k the eval set holds a verdict for (pool coverage).

    judged@k(q) = |{u in top-k(q) : u has a grade in qrels(q)}| / min(k, |ranking(q)|)

A unit is judged when the qrels give it any grade, 0 (judged non-relevant) included; in a run
these are the chunk qrels derived from the item's evidence spans, positive and grade-0, under the
run's overlap rule (:mod:`ragexp.metrics.relevance`), so "judged" means exactly "its relevance
comes from a person's verdict, not from the default that an unjudged unit is not relevant".
Rankings are read in :func:`~ragexp.metrics.ranking.trec_order`. The denominator is
``min(k, number retrieved)``, as ir_measures' ``Judged@k``. A query with an empty ranking has no
value; a query with no qrels at all has judged@k = 0 (ir_measures leaves such queries out). The
run's ``judged_at_{k}`` is the mean over the queries that have a value.

A low judged@k says the pipeline retrieves what nobody judged: its precision-type metrics count
those units as wrong (pool bias). ``ragexp evalset annotate --from-run RUN_ID`` queues them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ragexp.metrics.measure import at
from ragexp.metrics.ranking import trec_order


def judged_at_k(ranking: Sequence[tuple[str, float]], judged: Mapping[str, int] | set[str], k: int) -> float | None:
    """judged@k of one query (``None`` for an empty ranking)."""
    top = trec_order(ranking)[:k]
    if not top:
        return None
    return sum(unit in judged for unit, _ in top) / len(top)


def judged_metrics(run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]],
                   ks: Iterable[int]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """``(per_query, aggregate)`` with ``judged_at_{k}`` for each k: per query, and the mean."""
    per_query: dict[str, dict[str, float]] = {}
    aggregate: dict[str, float] = {}
    for k in sorted(set(ks)):
        key = at("judged", k)
        values = []
        for qid, ranking in run.items():
            value = judged_at_k(ranking, qrels.get(qid, {}), k)
            if value is not None:
                per_query.setdefault(qid, {})[key] = value
                values.append(value)
        if values:
            aggregate[key] = sum(values) / len(values)
    return per_query, aggregate
