"""A stratified sample of N queries over topic clusters, so frequent and rare topics both appear.

:func:`stratified_sample`:

1. cluster the queries' unit embeddings with k-means into ``k = min(ceil(N / 2), queries)`` topics
   (seeded; clusters are numbered by their traffic, 0 = most logged queries);
2. give every cluster one slot (rare topics appear), and the other ``N - k`` slots to clusters in
   proportion to their traffic (sum of the queries' frequencies; largest remainder, never more
   slots than a cluster has queries; what a full cluster cannot take goes to the others by the same
   rule), so frequent topics get more;
3. inside a cluster, its most frequent query first, then further ones drawn without replacement
   with probability proportional to frequency (Efraimidis-Spirakis keys ``u ** (1 / frequency)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sample:
    picked: list[int]  # query indices, by cluster then draw order
    cluster: np.ndarray  # cluster of every query
    k: int


def _cluster(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    if k == 1:
        return np.zeros(len(vectors), dtype=np.int64)
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=1, random_state=seed).fit_predict(vectors)


def _allocate(traffic: np.ndarray, sizes: np.ndarray, slots: int) -> np.ndarray:
    """One slot per cluster, the rest by largest remainder of ``traffic``, capped at ``sizes``."""
    given = np.ones(len(traffic), dtype=np.int64)
    slots -= len(traffic)
    while slots > 0:
        open_ = given < sizes
        if not open_.any():
            break
        share = np.where(open_, traffic, 0.0)
        quota = share / share.sum() * slots
        extra = np.minimum(np.floor(quota).astype(np.int64), sizes - given)
        remaining = slots - int(extra.sum())
        order = np.argsort(-(quota - np.floor(quota)), kind="stable")
        for index in order:
            if remaining == 0:
                break
            if open_[index] and given[index] + extra[index] < sizes[index]:
                extra[index] += 1
                remaining -= 1
        if extra.sum() == 0:
            break
        given += extra
        slots -= int(extra.sum())
    return given


def stratified_sample(vectors: np.ndarray, frequency: np.ndarray, n: int, seed: int = 0) -> Sample:
    """Draw ``n`` of the queries (rows of ``vectors``) as the module docstring says."""
    count = len(frequency)
    k = min(math.ceil(n / 2), count)
    raw = _cluster(vectors, k, seed)
    traffic = np.bincount(raw, weights=frequency, minlength=k)
    by_traffic = np.argsort(-traffic, kind="stable")
    renumber = np.empty(k, dtype=np.int64)
    renumber[by_traffic] = np.arange(k)
    cluster = renumber[raw]
    traffic = traffic[by_traffic]
    sizes = np.bincount(cluster, minlength=k)
    slots = _allocate(traffic, sizes, min(n, count))
    rng = np.random.default_rng(seed)
    picked: list[int] = []
    for c in range(k):
        members = np.flatnonzero(cluster == c)
        weights = frequency[members].astype(np.float64)
        head = int(members[np.argmax(weights)])
        rest = members[members != head]
        keys = rng.random(len(rest)) ** (1.0 / frequency[rest])
        picked.append(head)
        picked.extend(int(i) for i in rest[np.argsort(-keys, kind="stable")][: slots[c] - 1])
    return Sample(picked, cluster, k)
