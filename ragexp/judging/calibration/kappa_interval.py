"""Cohen's kappa with its large-sample confidence interval (Fleiss, Cohen & Everitt, 1969).

Over n items rated by two raters, with ``p_ij`` the share of items the first rater put in class
``i`` and the second in class ``j``, row and column shares ``p_i.`` and ``p_.j``::

    p_o   = sum_i p_ii                      p_e = sum_i p_i. * p_.i
    kappa = (p_o - p_e) / (1 - p_e)

    var(kappa) = [ sum_i p_ii * (1 - (p_i. + p_.i) * (1 - kappa))^2
                 + (1 - kappa)^2 * sum_{i != j} p_ij * (p_.i + p_j.)^2
                 - (kappa - p_e * (1 - kappa))^2 ] / (n * (1 - p_e)^2)

    CI = kappa -/+ z * sqrt(var(kappa)),  z = Phi^-1(1 - (1 - confidence)/2),  clipped to [-1, 1]

Kappa and its interval are undefined (``None``) for no items or when ``p_e == 1`` (both raters
used one and the same class). When only one rater used a single class, kappa is 0 by construction
(``p_o == p_e``) and the formula's variance is 0 too: the interval is left undefined, since no
sample size makes that 0 more certain. The interval is asymptotic: with the 20 claims of a spot
check it is wide, and at perfect agreement (``kappa == 1``) its width is 0, which says nothing
about a larger sample; read it as "how sure 20 claims can make you", not as exact.

With ``weights`` (a sample drawn across strata, each item weighing the inverse of its stratum's
sampling fraction) the shares ``p_ij`` are weighted shares, so kappa estimates the agreement over
the whole population the sample was drawn from, and ``n`` in the variance is Kish's effective
size ``(sum w)^2 / sum w^2``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class KappaInterval:
    n: int
    kappa: float | None
    se: float | None
    low: float | None
    high: float | None
    confidence: float


def kappa_interval(first: Sequence[str], second: Sequence[str], confidence: float = 0.95,
                   weights: Sequence[float] | None = None) -> KappaInterval:
    """Kappa of two raters over the same items with its ``confidence`` interval, optionally
    weighted (module docstring)."""
    if len(first) != len(second) or (weights is not None and len(weights) != len(first)):
        raise ValueError("raters must label the same items")
    weights = [1.0] * len(first) if weights is None else [float(w) for w in weights]
    total = sum(weights)
    pairs: Counter = Counter()
    rows: Counter = Counter()
    cols: Counter = Counter()
    for a, b, w in zip(first, second, weights):
        pairs[(a, b)] += w
        rows[a] += w
        cols[b] += w
    labels = sorted(set(rows) | set(cols))
    if not first:
        return KappaInterval(0, None, None, None, None, confidence)
    n = total * total / sum(w * w for w in weights)
    p = {(i, j): pairs[(i, j)] / total for i in labels for j in labels}
    row = {i: rows[i] / total for i in labels}
    col = {j: cols[j] / total for j in labels}
    p_o = sum(p[(i, i)] for i in labels)
    p_e = sum(row[i] * col[i] for i in labels)
    if p_e >= 1.0 - 1e-12:
        return KappaInterval(len(first), None, None, None, None, confidence)
    kappa = (p_o - p_e) / (1.0 - p_e)
    if len(rows) < 2 or len(cols) < 2:
        return KappaInterval(len(first), kappa, None, None, None, confidence)
    diagonal = sum(p[(i, i)] * (1.0 - (row[i] + col[i]) * (1.0 - kappa)) ** 2 for i in labels)
    off = (1.0 - kappa) ** 2 * sum(p[(i, j)] * (col[i] + row[j]) ** 2 for i in labels for j in labels if i != j)
    variance = max(0.0, (diagonal + off - (kappa - p_e * (1.0 - kappa)) ** 2) / (n * (1.0 - p_e) ** 2))
    se = variance**0.5
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    return KappaInterval(len(first), kappa, se, max(-1.0, kappa - z * se), min(1.0, kappa + z * se), confidence)


#: Resamples of :func:`bootstrap_kappa_interval` (its percentiles move by about 0.01 between seeds at 20 items).
RESAMPLES = 4000


def bootstrap_kappa_interval(first: Sequence[str], second: Sequence[str], confidence: float = 0.95,
                             weights: Sequence[float] | None = None, resamples: int = RESAMPLES,
                             seed: int = 0) -> KappaInterval:
    """Kappa with a percentile bootstrap interval, for the small samples of a review (at 15 to 20
    items the large-sample interval above is too narrow: docs/judging.md, measured). The items are
    resampled with replacement within each group of equal weight (the strata a review's sample was
    drawn across keep their sizes), as multinomial draws of each group's cells of the confusion
    table; a resample in which both raters used one and the same class (kappa undefined) counts as
    kappa 0, the agreement a single-class rater has. ``low``/``high`` are the ``(1 - confidence)/2``
    and ``(1 + confidence)/2`` quantiles of the resampled kappas, ``se`` their standard deviation;
    ``kappa`` and the undefined cases are those of :func:`kappa_interval`. Seeded: deterministic."""
    import numpy as np

    point = kappa_interval(first, second, confidence, weights)
    if point.low is None:
        return point
    weights = [1.0] * len(first) if weights is None else [float(w) for w in weights]
    labels = sorted(set(first) | set(second))
    cells = [(i, j) for i in labels for j in labels]
    rng = np.random.default_rng(seed)
    table = np.zeros((resamples, len(cells)))
    for weight in sorted(set(weights)):
        counts = Counter((a, b) for a, b, w in zip(first, second, weights) if w == weight)
        size = sum(counts.values())
        shares = np.array([counts[cell] / size for cell in cells])
        table += weight * rng.multinomial(size, shares, size=resamples)
    table /= table.sum(axis=1, keepdims=True)
    index = {cell: k for k, cell in enumerate(cells)}
    rows = np.stack([sum(table[:, index[(i, j)]] for j in labels) for i in labels], axis=1)
    cols = np.stack([sum(table[:, index[(i, j)]] for i in labels) for j in labels], axis=1)
    p_o = sum(table[:, index[(i, i)]] for i in labels)
    p_e = (rows * cols).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = np.where(p_e >= 1.0 - 1e-12, 0.0, (p_o - p_e) / (1.0 - p_e))
    low, high = np.quantile(kappas, [(1 - confidence) / 2, (1 + confidence) / 2])
    return KappaInterval(point.n, point.kappa, float(kappas.std(ddof=1)), float(low), float(high), confidence)
