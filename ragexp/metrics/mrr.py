"""Reciprocal rank (trec_eval ``recip_rank``) and its cut-off variant; MRR is their mean.

    RR   = 1 / r, r = rank of the first relevant unit; 0 if none is retrieved
    RR@k = RR if r <= k else 0
"""

from __future__ import annotations

import numpy as np


def first_relevant_rank(relevant: np.ndarray) -> np.ndarray:
    """Per-query 1-based rank of the first relevant unit, 0 where none is retrieved."""
    return np.where(relevant.any(axis=1), relevant.argmax(axis=1) + 1, 0)


def reciprocal_rank(relevant: np.ndarray, k: int | None = None) -> np.ndarray:
    """Per-query RR (``k=None``, no cutoff) or RR@k from a (n_queries x depth) boolean matrix in rank order."""
    rank = first_relevant_rank(relevant if k is None else relevant[:, :k])
    return np.divide(1.0, rank, out=np.zeros(len(rank)), where=rank > 0)
