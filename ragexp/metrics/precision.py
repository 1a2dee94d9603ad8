"""Context precision@k: the share of the top k that is relevant (trec_eval ``P_k``).

    context_precision@k = |relevant units at ranks 1..k| / k

The divisor is k even when fewer than k units were retrieved, as in trec_eval and in the method
article's ``context_precision_at_k`` (``hits / k``): a short ranking is not rewarded.
"""

from __future__ import annotations

import numpy as np


def context_precision_at_k(relevant: np.ndarray, k: int) -> np.ndarray:
    """Per-query context precision@k from a (n_queries x depth) boolean matrix in rank order."""
    return np.count_nonzero(relevant[:, :k], axis=1) / k
