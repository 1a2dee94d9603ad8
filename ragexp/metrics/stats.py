"""Small-sample statistics for comparing runs on one fixed eval set (pure numpy, seeded).

Every comparison here is *paired*: baseline and candidate answered the same queries, so the unit
of evidence is the per-query difference ``d_i = b_i - a_i`` and the effect is ``mean(d)``.
Pairing removes the between-query variance (easy vs hard questions), which is most of the noise.

- :func:`bootstrap_ci` / :func:`mean_ci`: percentile bootstrap CI of a mean; :func:`bootstrap_cis`
  of several means at once.
- :func:`paired_bootstrap_ci`: the same for ``mean(b - a)``.
- :func:`paired_randomization_test`: Monte-Carlo sign-flip test of ``mean(b - a) = 0``.
- :func:`exact_sign_flip_test`: the same test by full enumeration, for few non-zero differences.
- :func:`auto_tolerance` / :func:`recommended_tolerance`: how large a drop is still noise for an
  eval set of ``n`` queries; both go through :func:`tolerance_from_sd`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import NamedTuple

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_Z = 1.96
"""Two-sided 95% normal quantile: a drop smaller than 1.96 standard errors is treated as noise."""
EXACT_MAX_N = 20
"""Largest number of non-zero paired differences :func:`exact_sign_flip_test` enumerates."""
_BLOCK_CELLS = 1_000_000
"""Resample matrices are built in blocks of about this many cells to bound memory."""


class MeanCI(NamedTuple):
    mean: float
    low: float
    high: float
    n: int


def _as_vector(values, name: str = "values") -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return array


def _paired_differences(a, b) -> np.ndarray:
    a, b = _as_vector(a, "a"), _as_vector(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    return b - a


def _block_rows(n: int) -> int:
    return max(1, _BLOCK_CELLS // max(n, 1))


def bootstrap_ci(
    values, n_resamples: int = DEFAULT_RESAMPLES, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap ``(1 - alpha)`` CI of ``mean(values)``.

    Draw ``n_resamples`` samples of size ``n`` with replacement, take each sample's mean ``m*_r``,
    return the ``alpha/2`` and ``1 - alpha/2`` quantiles of ``{m*_r}``. Deterministic for a seed.
    """
    return bootstrap_cis({None: values}, n_resamples=n_resamples, alpha=alpha, seed=seed)[None]


def bootstrap_cis(
    samples: Mapping[Hashable, object], n_resamples: int = DEFAULT_RESAMPLES, alpha: float = 0.05, seed: int = 0
) -> dict[Hashable, tuple[float, float]]:
    """:func:`bootstrap_ci` of each sample, by key. Samples of one size share their resample
    indices (the ones :func:`bootstrap_ci` draws for that size and seed), so each CI equals
    :func:`bootstrap_ci`'s and the draws are made once per size, not once per sample."""
    vectors = {key: _as_vector(values) for key, values in samples.items()}
    cis: dict[Hashable, tuple[float, float]] = {}
    for n in dict.fromkeys(x.size for x in vectors.values()):
        group = {key: x for key, x in vectors.items() if x.size == n}
        rng = np.random.default_rng(seed)
        means = {key: np.empty(n_resamples) for key in group}
        step = _block_rows(n)
        for start in range(0, n_resamples, step):
            rows = min(step, n_resamples - start)
            index = rng.integers(0, n, size=(rows, n), dtype=np.int32)
            for key, x in group.items():
                means[key][start : start + rows] = x[index].mean(axis=1)
        for key in group:
            low, high = np.quantile(means[key], [alpha / 2, 1 - alpha / 2])
            cis[key] = (float(low), float(high))
    return {key: cis[key] for key in vectors}


def mean_ci(values, alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> MeanCI:
    """A run's metric as ``mean`` with its percentile-bootstrap ``(1 - alpha)`` CI and ``n``."""
    x = _as_vector(values)
    low, high = bootstrap_ci(x, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return MeanCI(float(x.mean()), low, high, int(x.size))


def paired_bootstrap_ci(
    a, b, n_resamples: int = DEFAULT_RESAMPLES, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``mean(b - a)``: queries are resampled as pairs."""
    return bootstrap_ci(_paired_differences(a, b), n_resamples=n_resamples, alpha=alpha, seed=seed)


def _tie_slack(d: np.ndarray) -> float:
    """Rounding slack for ``|sum| >= observed`` so that exact ties count as ties."""
    return 1e-9 * (1.0 + float(np.abs(d).sum()))


def paired_randomization_test(a, b, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> float:
    """Two-sided p-value of ``mean(b - a) = 0`` by random sign flips.

    Under the null each difference is as likely to have either sign, so with ``T = |sum_i d_i|``
    and ``R`` random sign vectors ``s``: ``p = (#{r : |sum_i s_ri d_i| >= T} + 1) / (R + 1)``.
    The ``+1`` counts the observed assignment, so ``p`` is never 0 (a valid Monte-Carlo p-value).
    Zero differences are dropped first: their sign never changes a sum. A flip vector is a row of
    random bits ``u`` (``s = 2u - 1``), so ``sum_i s_i d_i = 2 u.d - sum_i d_i``.
    """
    d = _paired_differences(a, b)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum())) - _tie_slack(d)
    total = float(d.sum())
    packed = (d.size + 7) // 8
    rng = np.random.default_rng(seed)
    count = 0
    step = _block_rows(d.size)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        plus = np.unpackbits(rng.integers(0, 256, size=(rows, packed), dtype=np.uint8), axis=1, count=d.size)
        count += int(np.count_nonzero(np.abs(2.0 * (plus @ d) - total) >= observed))
    return (count + 1) / (n_resamples + 1)


def _all_signed_sums(x: np.ndarray) -> np.ndarray:
    """The ``2**len(x)`` values of ``sum_i s_i x_i`` over every sign vector ``s``."""
    sums = np.zeros(1)
    for value in x:
        sums = np.concatenate([sums + value, sums - value])
    return sums


def exact_sign_flip_test(a, b) -> float:
    """Exact two-sided p-value of ``mean(b - a) = 0`` over all ``2**n`` sign flips.

    ``p = #{s in {-1,+1}^n : |sum_i s_i d_i| >= |sum_i d_i|} / 2**n``. Zero differences contribute
    a factor 2 to numerator and denominator alike, so only the ``m`` non-zero ones are enumerated
    (``m <= EXACT_MAX_N``), split in two halves whose ``2**(m/2)`` sums are paired by a sorted search.
    """
    d = _paired_differences(a, b)
    d = d[d != 0]
    if d.size > EXACT_MAX_N:
        raise ValueError(f"{d.size} non-zero differences: too many to enumerate (max {EXACT_MAX_N})")
    observed = abs(float(d.sum())) - _tie_slack(d)
    if observed <= 0:
        return 1.0
    half = d.size // 2
    left = np.sort(_all_signed_sums(d[:half]))
    right = _all_signed_sums(d[half:])
    at_least = left.size - np.searchsorted(left, observed - right, side="left")
    at_most = np.searchsorted(left, -observed - right, side="right")
    return float((at_least + at_most).sum()) / 2.0**d.size


def sign_flip_p_value(a, b, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> float:
    """The exact test when at most ``EXACT_MAX_N`` differences are non-zero, else Monte Carlo."""
    d = _paired_differences(a, b)
    if np.count_nonzero(d) <= EXACT_MAX_N:
        return exact_sign_flip_test(a, b)
    return paired_randomization_test(a, b, n_resamples=n_resamples, seed=seed)


def tolerance_from_sd(sd: float, n: int, z: float = DEFAULT_Z, floor_queries: float = 1.0) -> float:
    """``max(z * sd / sqrt(n), floor_queries / n)``: the noise band of a mean over ``n`` queries.

    ``sd / sqrt(n)`` is the standard error of a mean of ``n`` per-query values, so it shrinks as
    the eval set grows (a 50-question set is noisier than a 500-question one). The floor is
    ``floor_queries`` queries' worth of a metric bounded in ``[0, 1]``: with ``floor_queries=1`` a
    single query flipping never counts as a regression, even when nothing else moved.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    return max(z * sd / math.sqrt(n), floor_queries / n)


def auto_tolerance(diffs, z: float = DEFAULT_Z, floor_queries: float = 1.0) -> float:
    """Tolerance sized to this comparison: ``tolerance_from_sd(sd(d), n)`` over paired differences.

    ``sd(d)`` is the sample standard deviation (``ddof=1``) of the per-query differences, so the
    band is wide when many queries move in both directions (churn) and narrow when few move.
    Example: 6 of 120 queries lose a binary hit and nothing else moves, ``sd = 0.219``,
    tolerance ``= 1.96 * 0.219 / sqrt(120) = 0.039 < 0.05 = |delta|``: a regression.
    """
    d = _as_vector(diffs, "diffs")
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    return tolerance_from_sd(sd, d.size, z=z, floor_queries=floor_queries)


def recommended_tolerance(n: int, p: float = 0.8, z: float = DEFAULT_Z) -> float:
    """Planning tolerance before any comparison exists: ``tolerance_from_sd(sqrt(p(1-p)), n, z)``.

    ``z * sqrt(p(1-p)/n)``, ``z`` standard errors of a rate near ``p``: 11 points at ``n = 50``,
    7.8 at 100, 3.5 at 500 for ``p = 0.8``. It equals the :func:`auto_tolerance` of a change that
    flips a share ``p(1-p)`` (16%) of binary outcomes, so it is a conservative bound; a measured
    paired band is narrower when fewer queries move.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError("p must be in [0, 1]")
    return tolerance_from_sd(math.sqrt(p * (1.0 - p)), n, z=z)
