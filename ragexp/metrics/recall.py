"""Recall@k: the share of a query's relevant units found in its top k (trec_eval ``recall_k``).

    recall@k = |relevant units at ranks 1..k| / |relevant units in the qrels|

Not the method article's "Recall@k", which is :mod:`ragexp.metrics.hit_rate`: with three
relevant chunks of which one is in the top k, recall@k is 1/3 and hit rate@k is 1.
"""

from __future__ import annotations

import numpy as np


def recall_at_k(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Per-query recall@k from a (n_queries x depth) boolean matrix in rank order; 0 where ``n_relevant`` is 0."""
    found = np.count_nonzero(relevant[:, :k], axis=1).astype(np.float64)
    return np.divide(found, n_relevant, out=np.zeros_like(found), where=n_relevant > 0)
