"""The shared vectorised core: a run and its qrels as a (n_queries x depth) gain matrix.

Row ``i`` is query ``i``'s ranking in trec_eval order (score descending, ties by unit id
descending, as :func:`ragexp.metrics.ranking.trec_order`); column ``j`` holds the gain of the
unit at rank ``j + 1``: its qrels grade clipped at 0 (unjudged units and grades <= 0 gain
nothing, as in trec_eval), and 0 past the end of a shorter ranking. A unit is relevant iff the
qrels call its grade relevant (:meth:`ragexp.datamodel.Qrels.is_relevant`: grade >= the qrels'
``relevance_level``, trec_eval's ``-l``; every level is >= 1, so every relevant unit has a gain).

No ranking is sorted: every metric depends only on where the graded units (grade > 0) land,
and a unit's 0-based trec rank is a count,

    rank(u) = |{v : score_v > score_u}| + |{v : score_v = score_u and id_v > id_u}|,

computed for all graded units at once on a (n_queries x depth) score matrix. Python touches
each retrieved unit only in a few C-level passes, and ids only where a graded unit's score ties.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import gt, itemgetter, methodcaller

import numpy as np

from ragexp.datamodel import Qrels
from ragexp.errors import RagexpInputError

_COMPARISONS_PER_BLOCK = 1 << 22  # bounds the (graded units x depth) comparison matrices
# zip(*ranking) is the fastest transpose of a ranking until its one iterator per pair outgrows
# the CPU cache; itemgetter beyond.
_ZIP_TRANSPOSE_LIMIT = 512
_UNIT_ID = itemgetter(0)
_SCORE = itemgetter(1)
_GRADES = methodcaller("values")


@dataclass(frozen=True)
class GainMatrix:
    """``gains`` (n_queries x depth) in trec order; ``relevant`` (n_queries x depth) whether the
    qrels call the unit at each rank relevant; ``ideal_gains`` (n_queries x ideal_depth) the qrels
    gains sorted descending; ``n_relevant`` (n_queries,) the relevant units in the qrels."""

    gains: np.ndarray
    relevant: np.ndarray
    ideal_gains: np.ndarray
    n_relevant: np.ndarray

    def select(self, rows: np.ndarray) -> GainMatrix:
        """The matrix restricted to ``rows`` (a boolean mask or indices)."""
        return GainMatrix(self.gains[rows], self.relevant[rows], self.ideal_gains[rows], self.n_relevant[rows])


def build_gain_matrix(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Qrels,
    query_ids: Sequence[str],
    ideal_depth: int,
) -> GainMatrix:
    """One row per id in ``query_ids``; a query absent from ``run`` is an empty ranking.

    Raises :class:`RagexpInputError` when a ranking holds a unit twice (trec_eval refuses such
    runs too) or a score that is not a number, and ``TypeError`` when ``qrels`` is not a
    :class:`~ragexp.datamodel.Qrels` (a plain mapping has no relevance level).
    """
    if not isinstance(qrels, Qrels):
        raise TypeError(f"qrels must be a ragexp.datamodel.Qrels (grades and their relevance level), not {type(qrels).__name__}")
    rankings = [run.get(qid, ()) for qid in query_ids]
    judged_by_query = list(map(qrels.grades, query_ids))
    scores: list[float] = []  # every retrieved unit's score, queries concatenated
    hit_counts: list[int] = []  # per query: judged units it retrieved, then their input positions and grades
    hit_columns: list[int] = []
    hit_grades: list[int] = []
    for qid, ranking, judged in zip(query_ids, rankings, judged_by_query):
        if len(ranking) <= _ZIP_TRANSPOSE_LIMIT:
            ids, ranking_scores = zip(*ranking) if ranking else ((), ())
        else:
            ids, ranking_scores = tuple(map(_UNIT_ID, ranking)), map(_SCORE, ranking)
        retrieved = set(ids)
        if len(retrieved) != len(ids):
            raise RagexpInputError(f"query {qid!r} ranks unit {Counter(ids).most_common(1)[0][0]!r} twice", field="run")
        hits = judged.keys() & retrieved
        hit_counts.append(len(hits))
        hit_columns.extend(map(ids.index, hits))
        hit_grades.extend(map(judged.__getitem__, hits))
        scores.extend(ranking_scores)
    ranking_lengths = list(map(len, rankings))
    judged_counts = list(map(len, judged_by_query))
    judged_grades = list(chain.from_iterable(map(_GRADES, judged_by_query)))

    n_queries = len(query_ids)
    score = _score_matrix(scores, ranking_lengths, query_ids)
    hit_gain = np.asarray(hit_grades, dtype=np.float64)
    graded = hit_gain > 0
    rows = np.repeat(np.arange(n_queries), hit_counts)[graded]
    trec_rank = _trec_ranks(score, rows, np.asarray(hit_columns, dtype=np.intp)[graded], rankings)
    gains = np.zeros(score.shape)
    gains[rows, trec_rank] = hit_gain[graded]

    judged_row = np.repeat(np.arange(n_queries), judged_counts)
    judged_gain = np.maximum(np.asarray(judged_grades, dtype=np.float64), 0.0)
    ideal_gain = judged_gain[np.lexsort((-judged_gain, judged_row))]
    ideal_rank = _position_in_segment(judged_counts)
    kept = ideal_rank < ideal_depth
    ideal_gains = np.zeros((n_queries, ideal_depth))
    ideal_gains[judged_row[kept], ideal_rank[kept]] = ideal_gain[kept]
    n_relevant = np.bincount(judged_row[qrels.is_relevant(judged_gain)], minlength=n_queries)
    return GainMatrix(gains=gains, relevant=qrels.is_relevant(gains), ideal_gains=ideal_gains, n_relevant=n_relevant)


def _trec_ranks(
    score: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
    rankings: Sequence[Sequence[tuple[str, float]]],
) -> np.ndarray:
    """0-based trec rank of the units at (``rows``, ``columns``) of the score matrix (input order)."""
    ranks = np.empty(len(rows), dtype=np.intp)
    block = max(1, _COMPARISONS_PER_BLOCK // score.shape[1])
    for start in range(0, len(rows), block):
        block_rows, block_columns = rows[start : start + block], columns[start : start + block]
        row_scores = score[block_rows]
        own_score = row_scores[np.arange(len(block_rows)), block_columns][:, None]
        outranked_by = np.count_nonzero(row_scores > own_score, axis=1)
        tied_unit, tied_column = np.nonzero(row_scores == own_score)
        other = tied_column != block_columns[tied_unit]
        tied_unit, tied_column = tied_unit[other], tied_column[other]
        if len(tied_unit):
            tied_rows = block_rows[tied_unit].tolist()
            other_ids = [rankings[r][c][0] for r, c in zip(tied_rows, tied_column.tolist())]
            own_ids = [rankings[r][c][0] for r, c in zip(tied_rows, block_columns[tied_unit].tolist())]
            id_greater = np.fromiter(map(gt, other_ids, own_ids), dtype=bool, count=len(other_ids))
            outranked_by += np.bincount(tied_unit[id_greater], minlength=len(block_rows))
        ranks[start : start + block] = outranked_by
    return ranks


def _score_matrix(scores: list[float], ranking_lengths: list[int], query_ids: Sequence[str]) -> np.ndarray:
    """(n_queries x longest ranking) scores in input order, NaN past each ranking's end."""
    try:
        flat = np.fromiter(scores, dtype=np.float64, count=len(scores))
    except (TypeError, ValueError) as err:
        raise RagexpInputError(f"every score must be a number ({err})", field="run") from None
    row = np.repeat(np.arange(len(ranking_lengths)), ranking_lengths)
    not_a_number = np.flatnonzero(np.isnan(flat))
    if len(not_a_number):
        qid = query_ids[row[not_a_number[0]]]
        raise RagexpInputError(f"query {qid!r} has a NaN score, which has no rank", field="run")
    depth = max(ranking_lengths, default=0) or 1
    if len(flat) == depth * len(ranking_lengths):  # every ranking equally long: no padding
        return flat.reshape(len(ranking_lengths), depth)
    matrix = np.full((len(ranking_lengths), depth), np.nan)
    matrix[row, _position_in_segment(ranking_lengths)] = flat
    return matrix


def _position_in_segment(lengths: Sequence[int]) -> np.ndarray:
    """0-based position of each element inside its segment, for consecutive segments of ``lengths``."""
    lengths_array = np.asarray(lengths, dtype=np.intp)
    segment_starts = np.cumsum(lengths_array) - lengths_array
    return np.arange(lengths_array.sum()) - np.repeat(segment_starts, lengths_array)
