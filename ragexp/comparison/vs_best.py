"""Which runs are indistinguishable from the best one on the same eval set, per metric.

For a metric and K runs scored on the same queries (paired by ``query_id``, over the queries every
run has a value for): the best run is the one with the highest mean (lowest for a lower-is-better
metric; the first such run on equal means). Every other run ``r`` is tested against it with the
paired sign-flip permutation test of ``mean(best - r) = 0``
(:func:`ragexp.metrics.stats.sign_flip_p_value`: exact enumeration up to 20 non-zero
differences, else 10,000 seeded random flips). The K - 1 tests are corrected by **Bonferroni**:
``r`` is ``worse`` when ``p < alpha / (K - 1)``, else ``tied`` (the data cannot tell it from the
best at family-wise error ``alpha``). Bonferroni rather than Holm because every run gets its own
verdict and a tie must not depend on how the other runs did.

The noise line (:func:`noise_line`) states the smallest difference the eval set can detect, the
gate's planning tolerance (:func:`ragexp.metrics.stats.recommended_tolerance`):
``1.96 * sqrt(p (1 - p) / n)``, at least one query's worth ``1 / n``, for a rate near ``p``. At a
ceiling or floor (``p`` = 1 or 0: every query hits, or none does) that arithmetic has nothing to
say (no query varies, so ``1 / n`` would be a made-up floor): the line says so instead
(:func:`at_ceiling`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ragexp.metrics import stats

BEST, TIED, WORSE = "best", "tied", "worse"
DEFAULT_ALPHA = 0.05
#: How the summaries and ``ragexp compare`` print a tie mark beside the best value's ``*``.
TIE_MARK = "≈"


@dataclass(frozen=True)
class VsBest:
    """One run's standing on one metric: ``mean`` over the ``n`` common queries, ``status``
    (``best``/``tied``/``worse``), the raw ``p_value`` against the best (``None`` for the best)
    and the Bonferroni threshold it was compared to."""

    status: str
    mean: float
    n: int
    p_value: float | None
    threshold: float


def common_queries(per_query: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The query ids every run has a value for, sorted."""
    sets = [set(values) for values in per_query.values()]
    return sorted(set.intersection(*sets)) if sets else []


def classify(per_query: Mapping[str, Mapping[str, float]], *, lower_is_better: bool = False,
             alpha: float = DEFAULT_ALPHA, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, VsBest]:
    """``{run: VsBest}`` for runs given as ``{run: {query_id: value}}`` (module docstring).

    Runs are compared on their common queries; with none in common nothing is classified (``{}``).
    """
    queries = common_queries(per_query)
    if not queries or not per_query:
        return {}
    values = {run: np.array([float(by_query[q]) for q in queries]) for run, by_query in per_query.items()}
    sign = -1.0 if lower_is_better else 1.0
    best = max(values, key=lambda run: sign * values[run].mean())  # max keeps the first on equal means
    others = len(values) - 1
    threshold = alpha / others if others else alpha
    out = {}
    for run, x in values.items():
        if run == best:
            out[run] = VsBest(BEST, float(x.mean()), len(queries), None, threshold)
            continue
        p = stats.sign_flip_p_value(values[best], x, n_resamples=n_resamples, seed=seed)
        out[run] = VsBest(WORSE if p < threshold else TIED, float(x.mean()), len(queries), p, threshold)
    return out


def tie_set(standing: Mapping[str, VsBest]) -> list[str]:
    """The best run and every run tied with it, best first."""
    return [run for run, s in standing.items() if s.status == BEST] + [run for run, s in standing.items() if s.status == TIED]


def minimum_detectable_difference(n: int, rate: float) -> float:
    """The smallest difference in a rate near ``rate`` that ``n`` queries tell from noise: the
    gate's planning tolerance ``max(1.96 sqrt(rate (1 - rate) / n), 1 / n)``."""
    return stats.recommended_tolerance(n, p=min(1.0, max(0.0, rate)))


def at_ceiling(rate: float) -> bool:
    """Whether a rate is at 1 or 0 (within rounding): every query scored the same."""
    return rate >= 1.0 - 1e-12 or rate <= 1e-12


def noise_line(n: int, rate: float, label: str = "hit-rate") -> str:
    """``at n=131 a hit-rate difference below ~0.068 is noise (...)``: printed with every comparison;
    at a ceiling or floor it says the noise arithmetic is uninformative there (module docstring)."""
    if at_ceiling(rate):
        where = "ceiling" if rate > 0.5 else "floor"
        return (f"at n={n} the best {label} is {rate:.2f}, at its {where}: every query scores the same, so the noise "
                f"arithmetic is uninformative here (no difference can show); compare on a harder measure "
                f"(a smaller k, MRR, nDCG)")
    mdd = minimum_detectable_difference(n, rate)
    return (f"at n={n} a {label} difference below ~{mdd:.3f} is noise (1.96 standard errors of a rate near "
            f"{rate:.2f}, the gate's tolerance arithmetic)")


def describe_ties(metric_label: str, standing: Mapping[str, VsBest], names: Mapping[str, str] | None = None) -> str:
    """``3 configs are indistinguishable on hit rate@5 at n=131: a, b, c`` (or ``... a is best,
    every other config is worse``); ``names`` maps run keys to display names."""
    names = names or {}
    tied = tie_set(standing)
    if not tied:
        return ""
    n = next(iter(standing.values())).n
    shown = ", ".join(names.get(run, run) for run in tied)
    if len(tied) == 1:
        return f"{shown} is best on {metric_label} at n={n}; every other config is worse (paired test, Bonferroni)"
    return f"{len(tied)} configs are indistinguishable on {metric_label} at n={n}: {shown}"
