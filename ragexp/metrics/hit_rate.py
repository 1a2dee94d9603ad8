"""Hit rate@k: did any relevant unit reach the top k? (trec_eval ``success_k``).

    hit_rate@k = 1 if some unit at ranks 1..k is relevant else 0

This is what the method article calls "Recall@k" (``int(bool(set(retrieved[:k]) & gold))``).
"""

from __future__ import annotations

import numpy as np


def hit_rate_at_k(relevant: np.ndarray, k: int) -> np.ndarray:
    """Per-query hit rate@k from a (n_queries x depth) boolean matrix in rank order."""
    return relevant[:, :k].any(axis=1).astype(np.float64)
