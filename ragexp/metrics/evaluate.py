"""Score a run against qrels with every retrieval metric at every cutoff, exactly as trec_eval.

Conventions (trec_eval with the qrels' ``relevance_level``, checked against pytrec_eval in the tests):

- Each ranking is scored in :func:`~ragexp.metrics.ranking.trec_order` (score descending, ties
  by unit id descending), whatever order it is given in. A unit may appear once per ranking and
  every score must be a number other than NaN (else :class:`RagexpInputError`, as trec_eval
  refuses duplicate units too).
- A unit is relevant iff its qrels grade is relevant (:meth:`~ragexp.datamodel.Qrels.is_relevant`:
  grade >= the qrels' ``relevance_level``, 1 by default); a judged unit below it is judged
  non-relevant; an unjudged unit counts as grade 0. nDCG uses the grade as gain, whatever the level.
- A query in the qrels but absent from the run is scored as an empty ranking (trec_eval ``-c``):
  every metric 0. A query in the run with an empty ranking likewise scores 0.
- A query whose qrels hold no relevant unit, or that is absent from the qrels, cannot be scored
  (recall would divide by 0): it is listed in ``no_gold`` and left out of ``per_query``,
  ``first_relevant_rank`` and the means.
- Queries are reported in run order, then the qrels-only ones in qrels order. Memory is a few
  (n_queries x longest ranking) arrays.

Metric names (:func:`~ragexp.metrics.measure.metric_key`; ``doc=True`` gives ``doc_ndcg_at_10``): ``mrr``
(:mod:`~ragexp.metrics.mrr`, no cutoff) and for each k ``recall_at_{k}``
(:mod:`~ragexp.metrics.recall`), ``hit_rate_at_{k}`` (:mod:`~ragexp.metrics.hit_rate`),
``mrr_at_{k}``, ``context_precision_at_{k}`` (:mod:`~ragexp.metrics.precision`) and
``ndcg_at_{k}`` (:mod:`~ragexp.metrics.ndcg`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np

from ragexp.datamodel import Qrels
from ragexp.errors import RagexpInputError
from ragexp.metrics._matrix import build_gain_matrix
from ragexp.metrics.hit_rate import hit_rate_at_k
from ragexp.metrics.measure import metric_key
from ragexp.metrics.mrr import first_relevant_rank, reciprocal_rank
from ragexp.metrics.ndcg import ndcg_at_k
from ragexp.metrics.precision import context_precision_at_k
from ragexp.metrics.recall import recall_at_k


@dataclass(frozen=True)
class RetrievalEvaluation:
    """Per-query metrics, their means, and which queries could not be scored.

    ``aggregate`` holds the mean of every metric over the scored queries (NaN when none could be
    scored) plus ``n_queries`` (scored queries) and ``n_queries_no_gold`` (``doc_`` prefixed for documents).
    ``first_relevant_rank`` is the 1-based trec-order rank of each scored query's first relevant
    unit, None when none was retrieved.
    """

    per_query: dict[str, dict[str, float]]
    aggregate: dict[str, float]
    first_relevant_rank: dict[str, int | None]
    no_gold: list[str]


#: The metrics :func:`evaluate_run` reports at each cutoff, in its column order.
AT_K = ("recall", "hit_rate", "mrr", "context_precision", "ndcg")


def metric_names(ks: Sequence[int], doc: bool = False) -> list[str]:
    """The per-query metric names in the order :func:`evaluate_run` reports them."""
    return [metric_key("mrr", doc=doc)] + [metric_key(name, k, doc=doc) for k in ks for name in AT_K]


def evaluate_run(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Qrels,
    ks: Iterable[int],
    *,
    doc: bool = False,
) -> RetrievalEvaluation:
    """Score ``run`` (query id -> ranking of ``(unit_id, score)``) against ``qrels`` (query id ->
    unit id -> integer grade, with their relevance level) at every cutoff in ``ks``, naming the
    metrics document-level when ``doc``; see the module docstring for the rules."""
    cutoffs = _validated_cutoffs(ks)
    query_ids = list(run) + [qid for qid in qrels if qid not in run]
    all_queries = build_gain_matrix(run, qrels, query_ids, ideal_depth=cutoffs[-1])
    has_gold = all_queries.n_relevant > 0
    scored = list(compress(query_ids, has_gold.tolist()))
    no_gold = list(compress(query_ids, (~has_gold).tolist()))
    matrix = all_queries.select(has_gold)

    relevant = matrix.relevant
    columns = [reciprocal_rank(relevant)]
    for k in cutoffs:
        columns += [
            recall_at_k(relevant, matrix.n_relevant, k),
            hit_rate_at_k(relevant, k),
            reciprocal_rank(relevant, k),
            context_precision_at_k(relevant, k),
            ndcg_at_k(matrix.gains, matrix.ideal_gains, k),
        ]
    values = np.column_stack(columns)
    names = metric_names(cutoffs, doc)

    means = values.mean(axis=0) if scored else np.full(len(names), np.nan)
    aggregate: dict[str, float] = dict(zip(names, means.tolist()))
    aggregate[metric_key("n_queries", doc=doc)] = len(scored)
    aggregate[metric_key("n_queries_no_gold", doc=doc)] = len(no_gold)
    return RetrievalEvaluation(
        per_query=_rows_as_dicts(scored, names, values),
        aggregate=aggregate,
        first_relevant_rank={qid: rank or None for qid, rank in zip(scored, first_relevant_rank(relevant).tolist())},
        no_gold=no_gold,
    )


def _rows_as_dicts(query_ids: list[str], names: list[str], values: np.ndarray) -> dict[str, dict[str, float]]:
    """``{query_id: {name: value}}`` from a (n_queries x n_names) array.

    One flat list feeds every row (``zip`` stops at the end of ``names`` without taking a further
    cell), which spares the garbage collector one list per query.
    """
    cells = iter(values.ravel().tolist())
    return {qid: dict(zip(names, cells)) for qid in query_ids}


def _validated_cutoffs(ks: Iterable[int]) -> list[int]:
    """The distinct cutoffs, ascending; each must be an integer >= 1."""
    cutoffs = list(ks)
    if not cutoffs:
        raise RagexpInputError("at least one cutoff k is needed", field="ks")
    for k in cutoffs:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise RagexpInputError(f"cutoff {k!r} is not an integer >= 1", field="ks")
    return sorted({int(k) for k in cutoffs})
