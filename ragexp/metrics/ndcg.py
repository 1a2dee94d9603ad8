"""nDCG@k with graded gains (trec_eval ``ndcg_cut_k``).

    DCG@k  = sum over ranks r = 1..k of gain_r / log2(r + 1)
    nDCG@k = DCG@k / IDCG@k, 0 where IDCG@k = 0

``gain_r`` is the qrels grade of the unit at rank r (0 if unjudged or graded <= 0); IDCG@k is
the DCG@k of all the query's qrels gains sorted descending, retrieved or not.
"""

from __future__ import annotations

import numpy as np


def ndcg_at_k(gains: np.ndarray, ideal_gains: np.ndarray, k: int) -> np.ndarray:
    """Per-query nDCG@k from (n_queries x depth) gains in rank order and the ideal gains sorted descending."""
    dcg = discounted_cumulative_gain(gains[:, :k])
    ideal_dcg = discounted_cumulative_gain(ideal_gains[:, :k])
    return np.divide(dcg, ideal_dcg, out=np.zeros_like(dcg), where=ideal_dcg > 0)


def discounted_cumulative_gain(gains: np.ndarray) -> np.ndarray:
    """Per-row sum of ``gain_r / log2(r + 1)`` over all columns r = 1..depth."""
    discounts = np.log2(np.arange(2, gains.shape[1] + 2, dtype=np.float64))
    return (gains / discounts).sum(axis=1)
