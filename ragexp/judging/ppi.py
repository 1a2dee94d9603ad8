"""Prediction-powered inference (PPI): a judge metric corrected by the humans who checked a sample.

A run's judge metric is a weighted mean of the judge's predictions over the run's ``N`` units
(claims, answers): ``judge mean = sum_i w_i f_i`` (``f_i`` the judge's verdict as a number, 1 for
supported; ``w_i >= 0`` the unit's share in the metric, summing to 1). The quantity it stands for
is the same mean of the human labels, ``theta = sum_i w_i Y_i``, the value the metric would have
if a person had judged every unit. A person labels a random sample; PPI (Angelopoulos, Bates,
Fannjiang, Jordan & Zrnic, *Prediction-powered inference*, Science 2023) corrects the judge mean
by the judge's error on that sample.

Strata and the estimate
-----------------------
The units are split into strata ``h`` (the judge's verdict: ``supported`` / ``not_supported``, and
within a verdict whose weights differ more than twofold its weight class, :func:`design_strata`),
and within each stratum the labelled units ``S_h`` are a simple random sample (the review draws
one per stratum, :func:`draw_across`; a uniform sample of all units is one too, conditionally on
how many of each stratum it drew). With ``W_h = sum_{i in h} w_i`` and weighted (Hajek) means::

    fbar_h   = sum_{i in h} w_i f_i / W_h                          judge mean of stratum h, all units
    dbar_h   = sum_{j in S_h} w_j (Y_j - f_j) / sum_{j in S_h} w_j   rectifier: the judge's error, labelled
    theta^   = sum_h W_h (fbar_h + dbar_h)

With one stratum and equal weights this is the paper's ``mean(f on all N) - mean(f - Y on the n
labelled)``; with several it is stratified PPI (Fisch et al., *Stratified prediction-powered
inference*, 2024). When the judge's verdict is constant within a stratum (verdict strata)
``fbar_h + dbar_h`` is the human-labelled share of that verdict's sample, so
``theta^ = sum_v W_v * P^(human supported | judge said v)``: power tuning (PPI++, a factor
``lambda`` on ``f``) cancels within such a stratum and is not used. A stratum without labels
keeps the judge's mean (uncorrected) and, in the interval, the bounds 0 and 1.

Intervals (``z = Phi^-1(1 - (1 - confidence)/2)``)
-------------------------------------------------
- **CLT** (the paper's, and ``ppi_py.ppi_mean_ci(..., lam=1)`` per stratum; weights normalised to
  mean 1 within each set, standard deviations with ``ddof=0`` as there)::

      var_h = var(w~ f on all of h) / N_h + var(w~ (Y - f) on S_h) / n_h
      theta^ -/+ z * sqrt(sum_h W_h^2 var_h)

  It treats the judge's own ``N`` predictions as a sample too (``var(f)/N``), and needs large
  ``n_h``: with 20 labels and a rare judge error (no error in the sample: variance 0) it covers
  the truth far less often than it claims (docs/ppi.md, measured).
- **exact-MOVER** (the one logged, for 0/1 labels with a constant prediction per stratum): each
  stratum's share ``p^_h`` gets Clopper-Pearson's interval ``[l_h, u_h]`` (:func:`exact_bounds`)
  at the effective size ``n*_h = n_eff,h / (1 - n_h / N_h)`` (:func:`effective_size`: the smaller of
  Kish's and the linearised one over ``S_h``; and the finite-population correction: the target is
  this run's ``N`` units, so a fully labelled stratum is known exactly); the strata are combined by
  MOVER (Zou & Donner 2008)::

      low  = theta^ - sqrt(sum_h W_h^2 (p^_h - l_h)^2)
      high = theta^ + sqrt(sum_h W_h^2 (u_h - p^_h)^2)

  The exact interval never collapses on a sample without errors; over the grid of
  benchmarks/ppi_coverage.py it keeps >= 94 % coverage from 20 labels where the CLT interval, and
  Wilson's score interval in its place, do not (docs/ppi.md).

Transfer (:func:`transferred_estimate`): the labels of one run (the *source*) can stand for
another run of the same judge (the *target*) only under an assumption the data cannot check by
itself: a person's support rate given the judge's verdict, ``P(Y = 1 | f = v)``, is the same in
both runs. Then ``theta^_target = sum_v W_v(target) * p^_v(source)``, each ``p^_v`` with its
exact interval at the source's Kish effective size (no finite-population correction: the source's
claims are not the target's), combined by MOVER as above.

Planning: :func:`labels_needed` is the smallest total ``n`` whose CLT half-width under the
review's allocation (:func:`allocate_design`) is at most the target, from the same variance formula
with the finite-population factor ``(1 - n_h / N_h)`` and each share shrunk towards 1/2 as
Agresti & Coull do (``p~ = (x + z^2/2) / (n + z^2)``), so a sample without errors does not
promise that no more labels are needed.

Assumptions (docs/ppi.md): the labelled units are a random sample within each stratum of the
same run's units (a skipped unit is missing at random), and the labels answer the same question
the judge answered.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: The results keys of a run's PPI estimates start with it (``ppi.faithfulness``: :mod:`ragexp.evaluation.corrected`).
PREFIX = "ppi."


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def _normalised(weights: np.ndarray) -> np.ndarray:
    """Weights scaled to mean 1 (``ppi_py``'s ``construct_weight_vector``)."""
    return weights / weights.sum() * weights.size


def ppi_mean(labels, predictions, all_predictions, weights=None, all_weights=None) -> tuple[float, float]:
    """``(estimate, variance)`` of the one-stratum PPI mean (``lambda = 1``), exactly as
    ``ppi_py.ppi_mean_pointestimate`` / ``ppi_mean_ci(..., lam=1)`` compute them: ``labels`` and
    ``predictions`` are the labelled units' ``Y`` and ``f``, ``all_predictions`` the judge's ``f``
    on every unit (module docstring: ``var`` is the squared standard error)."""
    y = np.asarray(labels, dtype=np.float64)
    f = np.asarray(predictions, dtype=np.float64)
    f_all = np.asarray(all_predictions, dtype=np.float64)
    w = _normalised(np.ones(y.size) if weights is None else np.asarray(weights, dtype=np.float64))
    w_all = _normalised(np.ones(f_all.size) if all_weights is None else np.asarray(all_weights, dtype=np.float64))
    estimate = float((w_all * f_all).mean() + (w * (y - f)).mean())
    variance = float((w_all * f_all).std() ** 2 / f_all.size + (w * (y - f)).std() ** 2 / y.size)
    return estimate, variance


def exact_bounds(share, n, confidence: float):
    """Clopper-Pearson's exact interval of binomial shares at (effective) sizes ``n``, elementwise
    over arrays: with ``x = share * n`` successes, ``low = Beta(x, n - x + 1).ppf(a/2)`` (0 when
    ``x = 0``) and ``high = Beta(x + 1, n - x).ppf(1 - a/2)`` (1 when ``x = n``), ``a = 1 - confidence``;
    a non-integer ``n`` (Kish's effective size) enters the beta quantiles as it is. ``n = inf`` is the
    share itself, ``n <= 0`` is ``[0, 1]``."""
    from scipy.stats import beta

    share, n = np.broadcast_arrays(np.asarray(share, dtype=np.float64), np.asarray(n, dtype=np.float64))
    alpha = 1.0 - confidence
    finite = np.isfinite(n) & (n > 0)
    size = np.where(finite, n, 1.0)
    x = np.clip(np.where(finite, share, 0.5) * size, 0.0, size)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(x > 0, beta.ppf(alpha / 2, np.maximum(x, 1e-300), size - x + 1), 0.0)
        high = np.where(x < size, beta.ppf(1 - alpha / 2, x + 1, np.maximum(size - x, 1e-300)), 1.0)
    low = np.where(np.isinf(n), share, np.where(n <= 0, 0.0, low))
    high = np.where(np.isinf(n), share, np.where(n <= 0, 1.0, high))
    return low, high


def exact(share: float, n: float, confidence: float) -> tuple[float, float]:
    """:func:`exact_bounds` of one share."""
    low, high = exact_bounds(share, n, confidence)
    return float(low), float(high)


def effective_size(weights: np.ndarray, labels: np.ndarray) -> float:
    """The binomial sample size whose variance a weighted (Hajek) share of ``labels`` has: the smaller
    of Kish's ``(sum w)^2 / sum w^2`` (the design effect of unequal weights) and
    ``p (1 - p) / v``, ``v = sum w^2 (y - p)^2 / (sum w)^2`` the ratio estimator's linearised variance
    (which also sees labels that go with the weights, as when the heaviest claims are the
    unsupported ones; Kish's alone assumes they do not). Equal weights give ``n`` from both."""
    total = weights.sum()
    kish = total * total / (weights * weights).sum()
    share = float((weights * labels).sum() / total)
    variance = float((weights * weights * (labels - share) ** 2).sum() / (total * total))
    return kish if variance <= 0 else min(kish, share * (1 - share) / variance)


#: Within one verdict stratum, weights that differ by more than this factor are split into two weight
#: classes (:func:`weight_classes`). Chosen before any simulation: within a factor 2 Kish's effective
#: size loses at most 11 % of the labels (``n_eff / n >= 8/9`` for weights in ``[1, 2]``).
WEIGHT_CLASS_RATIO = 2.0
HEAVY, LIGHT = "heavy", "light"
#: Between a verdict and its weight class in a design stratum's name.
CLASS_SEPARATOR = "|"


def weight_classes(weights: Sequence[float]) -> list[str]:
    """The weight class of each unit of one verdict stratum: ``""`` for all when the largest weight
    is at most :data:`WEIGHT_CLASS_RATIO` times the smallest; else ``heavy`` for the units whose
    weight is at least ``t`` and ``light`` for the others, ``t`` the weighted median weight (the
    largest weight such that the units weighing at least ``t`` hold half the stratum's weight or
    more), so each class holds about half of the stratum's share of the metric. For query-mean
    faithfulness (a claim weighs ``1 / m_q``) ``heavy`` is the claims of short answers."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0 or w.max() <= WEIGHT_CLASS_RATIO * w.min():
        return [""] * w.size
    ordered = np.sort(w)[::-1]
    reached = np.cumsum(ordered) >= ordered.sum() / 2 * (1 - 1e-12)
    threshold = ordered[int(np.argmax(reached))]
    heavy = w >= threshold
    if heavy.all():
        return [""] * w.size
    return [HEAVY if h else LIGHT for h in heavy]


def design_strata(units: Sequence["Unit"]) -> list[str]:
    """The sampling strata of ``units`` (:class:`Unit` with a verdict stratum and its weight in the
    metric the review is drawn for): the verdict, and within it the weight class
    (``supported|heavy``, ``supported|light``; a verdict whose weights are alike stays whole)."""
    by_verdict: dict[str, list[int]] = defaultdict(list)
    for index, unit in enumerate(units):
        by_verdict[unit.stratum].append(index)
    out = [unit.stratum for unit in units]
    for verdict, members in by_verdict.items():
        for index, cls in zip(members, weight_classes([units[i].weight for i in members])):
            out[index] = f"{verdict}{CLASS_SEPARATOR}{cls}" if cls else verdict
    return out



@dataclass(frozen=True)
class Unit:
    """One unit of a judge metric: its id, the judge's prediction (1 supported, 0 not), its
    weight in the metric (any positive scale; normalised over all units) and its stratum."""

    id: str
    prediction: float
    weight: float = 1.0
    stratum: str = ""


@dataclass(frozen=True)
class StratumSummary:
    name: str
    units: int
    weight: float  # W_h: the stratum's share of the metric
    labels: int
    judge_mean: float
    estimate: float  # fbar_h + dbar_h (the judge mean when the stratum has no label)


@dataclass(frozen=True)
class PPIEstimate:
    """A judge metric and its PPI correction (module docstring). ``low``/``high`` are the logged
    interval (``interval`` names it: ``exact-mover`` or ``clt``); ``clt_low``/``clt_high`` the CLT
    one (``None`` when a stratum has no label to estimate its variance from)."""

    judge_mean: float
    estimate: float
    low: float
    high: float
    interval: str
    se: float | None
    clt_low: float | None
    clt_high: float | None
    n_labels: int
    n_units: int
    confidence: float
    strata: tuple[StratumSummary, ...]

    @property
    def uncorrected_strata(self) -> list[str]:
        """Strata with units but no label: their judge mean is used as it is."""
        return [s.name for s in self.strata if s.labels == 0 and s.units > 0]

    def describe(self) -> str:
        """``0.412 (95% CI 0.301 to 0.530, PPI from 20 human labels of 212 units)``."""
        left = f"; no labels among {', '.join(self.uncorrected_strata)}" if self.uncorrected_strata else ""
        return (f"{self.estimate:.3f} ({self.confidence:.0%} CI {self.low:.3f} to {self.high:.3f}, PPI from "
                f"{self.n_labels} human labels of {self.n_units} units{left}; judge alone {self.judge_mean:.3f})")


def ppi_estimate(units: Sequence[Unit], labels: Mapping[str, float], confidence: float = 0.95) -> PPIEstimate:
    """The stratified PPI estimate of ``sum_i w_i Y_i`` from every unit's prediction and the
    ``labels`` (unit id -> human label in [0, 1]) of a random sample within each stratum; labels
    of ids that are not units are ignored. Raises ``ValueError`` without units or with a weight
    that is not positive."""
    if not units:
        raise ValueError("no units")
    z = z_of(confidence)
    by_stratum: dict[str, list[Unit]] = defaultdict(list)
    for unit in units:
        if not unit.weight > 0:
            raise ValueError(f"unit {unit.id!r} has weight {unit.weight}; weights must be positive")
        by_stratum[unit.stratum].append(unit)
    total = sum(unit.weight for unit in units)
    binary = all(labels[u.id] in (0.0, 1.0) for u in units if u.id in labels) and all(
        len({u.prediction for u in members}) == 1 for members in by_stratum.values())
    summaries, estimate, variance, judge_mean = [], 0.0, 0.0, 0.0
    below = above = 0.0
    clt_defined = True
    for name in sorted(by_stratum):
        members = by_stratum[name]
        share = sum(u.weight for u in members) / total
        f_all = np.array([u.prediction for u in members])
        w_all = np.array([u.weight for u in members])
        fbar = float((w_all * f_all).sum() / w_all.sum())
        labelled = [u for u in members if u.id in labels]
        judge_mean += share * fbar
        if labelled:
            y = [labels[u.id] for u in labelled]
            f = [u.prediction for u in labelled]
            w = [u.weight for u in labelled]
            part, part_variance = ppi_mean(y, f, f_all, w, w_all)
            variance += share * share * part_variance
        else:
            part = fbar
            clt_defined = False
        estimate += share * part
        if binary:
            if labelled:
                w = np.array([u.weight for u in labelled])
                fraction = len(labelled) / len(members)
                n_eff = effective_size(w, np.array([labels[u.id] for u in labelled]))
                low, high = exact(part, math.inf if fraction >= 1 else n_eff / (1 - fraction), confidence)
            else:
                low, high = 0.0, 1.0
            below += (share * (part - low)) ** 2
            above += (share * (high - part)) ** 2
        summaries.append(StratumSummary(name, len(members), share, len(labelled), fbar, part))
    se = math.sqrt(variance) if clt_defined else None
    clt = (estimate - z * se, estimate + z * se) if se is not None else (None, None)
    if binary:
        low, high, kind = max(0.0, estimate - math.sqrt(below)), min(1.0, estimate + math.sqrt(above)), "exact-mover"
    elif se is not None:
        low, high, kind = clt[0], clt[1], "clt"
    else:
        low, high, kind = -math.inf, math.inf, "none"
    n_labels = sum(s.labels for s in summaries)
    return PPIEstimate(judge_mean, estimate, low, high, kind, se, clt[0], clt[1], n_labels, len(units), confidence,
                       tuple(summaries))


def transferred_estimate(target: Sequence[Unit], source: Sequence[Unit], labels: Mapping[str, float],
                         confidence: float = 0.95) -> PPIEstimate:
    """The target's metric from the source's labels per verdict stratum (module docstring,
    "Transfer"); both runs' strata must be verdicts (a constant prediction each) and the labels 0/1,
    else ``ValueError``. A target stratum the source has no label for keeps the judge's value
    and the bounds 0 and 1."""
    total = sum(unit.weight for unit in target)
    if not target or not total > 0:
        raise ValueError("no target units")
    by_target: dict[str, list[Unit]] = defaultdict(list)
    for unit in target:
        by_target[unit.stratum].append(unit)
    labelled: dict[str, list[Unit]] = defaultdict(list)
    for unit in source:
        if unit.id in labels:
            labelled[unit.stratum].append(unit)
    for members in (*by_target.values(), *labelled.values()):
        if len({u.prediction for u in members}) != 1:
            raise ValueError("labels transfer between runs only within verdict strata (a constant prediction each)")
    if any(labels[u.id] not in (0.0, 1.0) for members in labelled.values() for u in members):
        raise ValueError("labels transfer between runs only as 0/1 labels")
    estimate = judge_mean = below = above = 0.0
    summaries = []
    for name in sorted(by_target):
        members = by_target[name]
        share = sum(u.weight for u in members) / total
        fbar = sum(u.weight * u.prediction for u in members) / sum(u.weight for u in members)
        judge_mean += share * fbar
        found = labelled.get(name, [])
        if found:
            w = np.array([u.weight for u in found])
            part = float((w * np.array([labels[u.id] for u in found])).sum() / w.sum())
            low, high = exact(part, w.sum() ** 2 / (w * w).sum(), confidence)
        else:
            part, low, high = fbar, 0.0, 1.0
        estimate += share * part
        below += (share * (part - low)) ** 2
        above += (share * (high - part)) ** 2
        summaries.append(StratumSummary(name, len(members), share, len(found), fbar, part))
    return PPIEstimate(judge_mean, estimate, max(0.0, estimate - math.sqrt(below)), min(1.0, estimate + math.sqrt(above)),
                       "exact-mover (transferred)", None, None, None, sum(s.labels for s in summaries), len(target),
                       confidence, tuple(summaries))


def allocate(n: int, sizes: Mapping[Hashable, int]) -> dict[Hashable, int]:
    """How many of ``n`` draws each stratum gets when the sample is drawn across strata: the same
    number from each, a stratum with fewer units giving all of them and its share to the others
    (water-filling: every stratum gets ``min(N_h, L)`` for the largest level ``L`` that fits, the
    rest one more each in the strata's name order). Monotone in ``n``, so a larger sample contains
    the smaller one's allocation."""
    n = min(n, sum(sizes.values()))
    low, high = 0, max(sizes.values(), default=0)
    while low < high:  # the largest L with sum(min(N_h, L)) <= n
        mid = (low + high + 1) // 2
        if sum(min(size, mid) for size in sizes.values()) <= n:
            low = mid
        else:
            high = mid - 1
    counts = {stratum: min(size, low) for stratum, size in sizes.items()}
    left = n - sum(counts.values())
    for stratum in sorted(sizes, key=str):
        if left and counts[stratum] < sizes[stratum]:
            counts[stratum] += 1
            left -= 1
    return counts


def allocate_design(n: int, sizes: Mapping[str, int]) -> dict[str, int]:
    """:func:`allocate` in two levels for design strata named ``verdict`` or ``verdict|class``
    (:func:`design_strata`): first the same number per verdict, then within a verdict the same
    number per weight class. Each class holds about half its verdict's weight, so equal numbers
    draw a verdict's claims about in proportion to their weight in the metric. Monotone in ``n``."""
    verdict_of = {name: name.split(CLASS_SEPARATOR, 1)[0] for name in sizes}
    per_verdict = allocate(n, {v: sum(size for name, size in sizes.items() if verdict_of[name] == v)
                               for v in set(verdict_of.values())})
    counts: dict[str, int] = {}
    for verdict, count in per_verdict.items():
        counts.update(allocate(count, {name: size for name, size in sizes.items() if verdict_of[name] == verdict}))
    return counts


def draw_across(items: Sequence, n: int, seed: int, stratum_of, key=lambda item: item.id) -> list:
    """``n`` items drawn across strata (:func:`allocate_design`: the same number per verdict, then per
    weight class within it): each stratum's items are shuffled by a generator seeded with ``seed``
    and the stratum's name, and its first ``n_h`` taken; so the same seed with a larger ``n`` draws
    a superset. Returned sorted by ``key``."""
    groups: dict[str, list] = defaultdict(list)
    for item in sorted(items, key=key):
        groups[stratum_of(item)].append(item)
    counts = allocate_design(n, {name: len(group) for name, group in groups.items()})
    chosen = []
    for name, group in groups.items():
        order = list(group)
        random.Random(f"{seed}/{name}").shuffle(order)
        chosen += order[: counts[name]]
    return sorted(chosen, key=key)


def labels_needed(result: PPIEstimate, width_target: float) -> int:
    """How many more labels, drawn across the strata not yet fully labelled as :func:`allocate`
    draws (a stratum keeping at least the labels it has), would make the CLT interval at most
    ``width_target`` wide (module docstring, "Planning"; each stratum's current share is the
    plug-in, as if its units weighed the same). A fully labelled stratum (claims against an empty
    context, labelled by construction) is known and takes none. Labelling every unit is exact, so
    the answer is at most the number of unlabelled units."""
    if width_target <= 0:
        raise ValueError("width must be positive")
    z = z_of(result.confidence)
    open_strata = [s for s in result.strata if s.labels < s.units]
    sizes = {s.name: s.units for s in open_strata}
    have = sum(s.labels for s in open_strata)

    def planned(total: int) -> dict:
        counts = allocate_design(total, sizes)
        return {s.name: max(counts[s.name], s.labels) for s in open_strata}

    def width(total: int) -> float:
        counts = planned(total)
        variance = 0.0
        for s in open_strata:
            n_h = counts[s.name]
            if n_h >= s.units:
                continue
            if n_h == 0:
                return math.inf
            shrunk = (s.estimate * s.labels + z * z / 2) / (s.labels + z * z)
            variance += s.weight ** 2 * shrunk * (1 - shrunk) * (1 - n_h / s.units) / n_h
        return 2 * z * math.sqrt(variance)

    low, high = have, sum(sizes.values())  # width(high) == 0: every unit labelled
    while low < high:  # the planned width only shrinks as the total grows
        mid = (low + high) // 2
        if width(mid) <= width_target:
            high = mid
        else:
            low = mid + 1
    return sum(planned(low).values()) - have
