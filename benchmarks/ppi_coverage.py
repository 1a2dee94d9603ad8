"""Coverage and width of PPI intervals over a grid of the shapes real runs have: docs/ppi.md.

A run is ``--queries`` answers (default 100) whose claim counts ``m_q`` are drawn once per seed from
1..12 with ``P(m) ~ 1/sqrt(m)`` (a fifth of the answers have one claim). Each repetition draws new
truths, verdicts and review labels for that run. The grid:

- **weights**: ``equal`` (``claim_faithfulness``) or ``query-mean`` (``faithfulness``: a claim of
  query ``q`` weighs ``1 / m_q``, so a claim of a one-claim answer weighs 12 times one of a
  12-claim answer);
- **errors**: ``independent`` (every claim truly supported with probability ``rate``, the judge
  wrong with probability ``1 - accuracy``) or ``linked`` to difficulty: short answers are the hard
  ones, ``logit P(supported) = logit(rate) - 2 (h_q - 0.3) / 0.7`` and the judge's error probability
  ``min(0.5, (1 - accuracy) (0.5 + 2.5 h_q))``, ``h_q = 1 / m_q``;
- **rate** 0.05 to 0.98, **judge** ``always`` (calls every claim supported) or right with
  probability 0.7, 0.85, 0.99, **labels** 10, 20, 50, 100.

The truth is the metric over this run's claims as a person would label them (the finite population).
Intervals (95 %), each from the same draws:

- ``before``: ragexp's logged interval as it was: labels drawn the same number per verdict,
  uniformly within a verdict, Hajek estimate, each verdict's share with Wilson's interval at Kish's
  effective size, combined by MOVER;
- ``verdict strata, exact``: the same draw with today's per-stratum interval, Clopper-Pearson's
  (:func:`ragexp.judging.ppi.ppi_estimate` on verdict strata);
- ``after``: the logged interval now: labels drawn per verdict and within it per weight class
  (:func:`ragexp.judging.ppi.design_strata`, :func:`~ragexp.judging.ppi.allocate_design`),
  :func:`~ragexp.judging.ppi.ppi_estimate` on those strata;
- ``ppi_py``: ``ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, lam=1, w=..., w_unlabeled=...)`` on a
  uniform sample of the run's claims (the paper's design, the independent reference);
- ``ppi_py strat.``: ``ppi_py``'s interval per design stratum of ``after``, summed as stratified
  PPI does (undefined when a stratum has no label: counted as not covering).

All intervals are computed vectorised over the repetitions; for the first repetitions of every cell
the vectorised ``verdict strata, exact`` and ``after`` are checked against :func:`~ragexp.judging.ppi.ppi_estimate`
and the ``ppi_py`` columns against ``ppi_py`` itself (an ``AssertionError`` stops the run). The
Monte-Carlo error of a coverage near 95 % over ``R`` repetitions is ``sqrt(0.95 * 0.05 / R)``.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.ppi_coverage --repetitions 1000 --seed 2``
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import time

import numpy as np

from ragexp.judging.ppi import Unit, allocate, allocate_design, design_strata, ppi_estimate, exact_bounds, z_of

WEIGHTS = ("equal", "query-mean")
ERRORS = ("independent", "linked")
RATES = (0.05, 0.2, 0.5, 0.8, 0.9, 0.98)
JUDGES = ("always", 0.7, 0.85, 0.99)
LABELS = (10, 20, 50, 100)
METHODS = ("before", "verdict strata, exact", "after", "ppi_py", "ppi_py strat.")
CHECKED = 3  # repetitions per cell checked against ppi_estimate and ppi_py


def claim_counts(rng: np.random.Generator, queries: int) -> np.ndarray:
    m = np.arange(1, 13)
    p = 1 / np.sqrt(m)
    return rng.choice(m, queries, p=p / p.sum())


def simulate(rng, counts: np.ndarray, errors: str, rate: float, judge, reps: int):
    """``(Y, F)``: truths and verdicts, ``reps x N``."""
    h = np.repeat(1.0 / counts, counts)
    if errors == "linked":
        logit = math.log(rate / (1 - rate)) - 2 * (h - 0.3) / 0.7
        p_true = 1 / (1 + np.exp(-logit))
        wrong = np.minimum(0.5, (1 - judge) * (0.5 + 2.5 * h)) if judge != "always" else None
    else:
        p_true = np.full(h.size, rate)
        wrong = np.full(h.size, 1 - judge) if judge != "always" else None
    y = rng.random((reps, h.size)) < p_true
    f = np.ones_like(y) if judge == "always" else y ^ (rng.random((reps, h.size)) < wrong)
    return y.astype(float), f.astype(float)


def strata_codes(f_row: np.ndarray, w: np.ndarray, with_classes: bool) -> list[str]:
    units = [Unit(str(i), v, wi, "supported" if v else "not_supported") for i, (v, wi) in enumerate(zip(f_row, w))]
    return design_strata(units) if with_classes else [u.stratum for u in units]


def fast_strata(f: np.ndarray, w: np.ndarray, with_classes: bool):
    """Integer design strata ``reps x N`` and their names, equal to :func:`design_strata` row by row
    (vectorised over the few distinct weights)."""
    names = ["not_supported", "supported", "not_supported|heavy", "not_supported|light", "supported|heavy",
             "supported|light"]
    codes = f.astype(int).copy()
    if not with_classes:
        return codes, names
    for verdict in (0, 1):
        member = f == verdict
        wm = np.where(member, w, np.nan)
        wmax, wmin = np.nanmax(wm, axis=1), np.nanmin(wm, axis=1)
        split = wmax > 2.0 * wmin
        values = np.unique(w)[::-1]  # heaviest first
        shares = np.stack([(member & (w == v)).sum(1) * v for v in values], axis=1)
        total = shares.sum(1, keepdims=True)
        reached = np.cumsum(shares, axis=1) >= total / 2 * (1 - 1e-12)
        threshold = values[np.argmax(reached, axis=1)]
        heavy = w[None, :] >= threshold[:, None]
        all_heavy = ~((member & ~heavy).any(1))
        split &= ~all_heavy
        code = np.where(heavy, 2 + 2 * verdict, 3 + 2 * verdict)
        codes = np.where(member & split[:, None], code, codes)
    return codes, names


@functools.lru_cache(maxsize=None)
def allocation(n: int, sizes: tuple, names: tuple, with_classes: bool) -> list[int]:
    present = {name: size for name, size in zip(names, sizes) if size}
    counts = allocate_design(n, present) if with_classes else allocate(n, present)
    return [counts.get(name, 0) for name in names]


def draw(keys: np.ndarray, codes: np.ndarray, names: list[str], n: int, with_classes: bool) -> np.ndarray:
    """The labelled mask: per row, :func:`allocate_design` (or :func:`allocate` on verdicts) over the
    strata's sizes, each stratum's members taken in the order of ``keys``."""
    reps, size = codes.shape
    order = np.argsort(keys, axis=1)
    sorted_codes = np.take_along_axis(codes, order, axis=1)
    chosen_sorted = np.zeros_like(sorted_codes, dtype=bool)
    sizes = np.stack([(codes == k).sum(1) for k in range(len(names))], axis=1)
    wanted = np.array([allocation(n, tuple(row), tuple(names), with_classes) for row in sizes.tolist()])
    for k in range(len(names)):
        member = sorted_codes == k
        rank = np.cumsum(member, axis=1) - 1
        chosen_sorted |= member & (rank < wanted[:, k:k + 1])
    chosen = np.zeros_like(chosen_sorted)
    np.put_along_axis(chosen, order, chosen_sorted, axis=1)
    return chosen


def wilson_bounds(share, n, z: float):
    """Wilson's score interval at (effective) size ``n`` (``inf``: the share; ``0``: ``[0, 1]``), the
    per-stratum interval ragexp logged before the exact one (``before``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = (share + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(np.maximum(share * (1 - share), 0.0) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        low, high = np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)
    return (np.where(np.isinf(n), share, np.where(n <= 0, 0.0, low)),
            np.where(np.isinf(n), share, np.where(n <= 0, 1.0, high)))


def mover(y, f, w, codes, chosen, n_strata, bounds, kish_only=False):
    """Vectorised :func:`ppi_estimate` (binary labels, constant verdict per stratum) with the
    per-stratum interval ``bounds(share, n)`` at :func:`~ragexp.judging.ppi.effective_size` (Kish's
    alone with ``kish_only``, as before): estimate, low, high per row."""
    total = w.sum()
    estimate = np.zeros(y.shape[0])
    below = np.zeros(y.shape[0])
    above = np.zeros(y.shape[0])
    parts = []
    for k in range(n_strata):
        member = codes == k
        share = (member * w).sum(1) / total
        size = member.sum(1)
        picked = member & chosen
        n = picked.sum(1)
        sw, sw2, swy = (picked * w).sum(1), (picked * w * w).sum(1), (picked * w * y).sum(1)
        sw2y = (picked * w * w * y).sum(1)
        judge = (member * f).sum(1) / np.maximum(size, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(n > 0, swy / sw, judge)
            kish = sw * sw / sw2
            linear = (sw2y * (1 - 2 * part) + part * part * sw2) / (sw * sw)
            linear = np.where(kish_only, 0.0, linear)
            n_eff = np.where(n > 0, np.where(linear > 1e-15, np.minimum(kish, part * (1 - part) / linear), kish), 0.0)
            star = np.where(n >= size, np.inf, n_eff / (1 - n / np.maximum(size, 1)))
        low, high = bounds(part, np.where(n > 0, star, 0.0))
        present = size > 0
        estimate += np.where(present, share * part, 0.0)
        below += np.where(present, (share * (part - low)) ** 2, 0.0)
        above += np.where(present, (share * (high - part)) ** 2, 0.0)
        parts.append((share, part))
    return estimate, np.maximum(0.0, estimate - np.sqrt(below)), np.minimum(1.0, estimate + np.sqrt(above))


def clt_terms(x, w, mask):
    """``(sum w x / sum w, var(w~ x) / n)`` over the masked units of each row, ``w~`` normalised to
    mean 1, ``ddof = 0`` (``ppi_py``'s conventions)."""
    n = mask.sum(1)
    s = (mask * w).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (mask * w * x).sum(1) / s
        variance = ((mask * w * w * x * x).sum(1) / (s * s) - mean * mean / n)
    return mean, np.maximum(variance, 0.0)


def ppi_py_uniform(y, f, w, keys, n, z):
    order = np.argsort(keys, axis=1)
    chosen = np.zeros(keys.shape, dtype=bool)
    np.put_along_axis(chosen, order[:, :n], True, axis=1)
    everyone = np.ones(keys.shape, dtype=bool)
    fbar, var_f = clt_terms(f, w, everyone)
    rect, var_r = clt_terms(y - f, w, chosen)
    half = z * np.sqrt(var_f + var_r)
    return fbar + rect, fbar + rect - half, fbar + rect + half, chosen


def ppi_py_stratified(y, f, w, codes, chosen, n_strata, z):
    estimate = np.zeros(y.shape[0])
    variance = np.zeros(y.shape[0])
    defined = np.ones(y.shape[0], dtype=bool)
    total = w.sum()
    for k in range(n_strata):
        member = codes == k
        share = (member * w).sum(1) / total
        picked = member & chosen
        present = member.any(1)
        fbar, var_f = clt_terms(f, w, member)
        rect, var_r = clt_terms(y - f, w, picked)
        has = picked.any(1)
        defined &= ~present | has
        estimate += np.where(present & has, share * (fbar + rect), np.where(present, share * np.nan_to_num(fbar), 0.0))
        variance += np.where(present & has, share * share * (var_f + var_r), 0.0)
    half = z * np.sqrt(variance)
    return estimate, np.where(defined, estimate - half, np.nan), np.where(defined, estimate + half, np.nan)


def check(y, f, w, codes, names, chosen, low, high, with_classes):
    """The vectorised interval equals :func:`ppi_estimate` on the first :data:`CHECKED` rows."""
    for r in range(min(CHECKED, y.shape[0])):
        strata = strata_codes(f[r], w, with_classes)
        assert strata == [names[c] for c in codes[r]], "vectorised strata differ from design_strata"
        units = [Unit(str(i), f[r, i], w[i], strata[i]) for i in range(w.size)]
        result = ppi_estimate(units, {str(i): y[r, i] for i in np.flatnonzero(chosen[r])})
        assert abs(result.low - low[r]) < 1e-9 and abs(result.high - high[r]) < 1e-9, (result, low[r], high[r])


def check_ppi_py(y, f, w, chosen, low, high, codes=None, n_strata=0):
    import ppi_py

    for r in range(min(CHECKED, y.shape[0])):
        if codes is None:
            (lo,), (hi,) = ppi_py.ppi_mean_ci(y[r, chosen[r]], f[r, chosen[r]], f[r], alpha=0.05, lam=1,
                                              w=w[chosen[r]], w_unlabeled=w)
            assert abs(lo - low[r]) < 1e-9 and abs(hi - high[r]) < 1e-9, (lo, hi, low[r], high[r])
            continue
        if np.isnan(low[r]):
            continue
        estimate = variance = 0.0
        for k in range(n_strata):
            member, picked = codes[r] == k, (codes[r] == k) & chosen[r]
            if not member.any():
                continue
            share = w[member].sum() / w.sum()
            point = float(ppi_py.ppi_mean_pointestimate(y[r, picked], f[r, picked], f[r, member], lam=1,
                                                        w=w[picked], w_unlabeled=w[member])[0])
            (lo,), (hi,) = ppi_py.ppi_mean_ci(y[r, picked], f[r, picked], f[r, member], alpha=0.05, lam=1,
                                              w=w[picked], w_unlabeled=w[member])
            estimate += share * point
            variance += (share * (hi - lo) / (2 * z_of(0.95))) ** 2
        half = z_of(0.95) * math.sqrt(variance)
        assert abs(estimate - half - low[r]) < 1e-9 and abs(estimate + half - high[r]) < 1e-9


def cell(rng, counts, weights, errors, rate, judge, reps):
    w = np.repeat(1.0 / counts, counts) if weights == "query-mean" else np.ones(counts.sum())
    y, f = simulate(rng, counts, errors, rate, judge, reps)
    truth = (y * w).sum(1) / w.sum()
    z = z_of(0.95)
    keys = rng.random(y.shape)
    out = {}
    for n in LABELS:
        row = {}
        exact = functools.partial(exact_bounds, confidence=0.95)
        for method, with_classes, bounds in (("before", False, functools.partial(wilson_bounds, z=z)),
                                             ("verdict strata, exact", False, exact), ("after", True, exact)):
            codes, names = fast_strata(f, w, with_classes)
            if with_classes and weights == "equal":
                assert (codes < 2).all()
            chosen = draw(keys, codes, names, n, with_classes)
            _, low, high = mover(y, f, w, codes, chosen, len(names), bounds, kish_only=method == "before")
            if method != "before":
                check(y, f, w, codes, names, chosen, low, high, with_classes)
            row[method] = (low, high)
            if with_classes:
                _, slow, shigh = ppi_py_stratified(y, f, w, codes, chosen, len(names), z)
                check_ppi_py(y, f, w, chosen, slow, shigh, codes, len(names))
                row["ppi_py strat."] = (slow, shigh)
        _, low, high, chosen = ppi_py_uniform(y, f, w, keys, n, z)
        check_ppi_py(y, f, w, chosen, low, high)
        row["ppi_py"] = (low, high)
        out[n] = {m: (float(np.mean((low <= truth + 1e-12) & (truth <= high + 1e-12))),
                      float(np.nanmean(high - low)) if not np.isnan(high - low).all() else math.nan)
                  for m, (low, high) in row.items()}
    return out, float(np.mean((f * w).sum(1) / w.sum() - truth))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    counts = claim_counts(rng, args.queries)
    se = math.sqrt(0.95 * 0.05 / args.repetitions)
    print(f"{args.queries} answers, {counts.sum()} claims ({np.mean(counts == 1):.0%} one-claim answers), "
          f"{args.repetitions} repetitions per cell, seed {args.seed}; Monte-Carlo error of a 95 % coverage "
          f"+/- {100 * se:.2f} points (1 s.e.)")
    print("\n| weights | errors | rate | judge | labels | judge bias | " +
          " | ".join(f"{m} cover (width)" for m in METHODS) + " | after / narrowest covering |")
    print("|---|---|---|---|---|---|" + "---|" * (len(METHODS) + 1))
    worst = {m: (2.0, None) for m in METHODS}
    ratios, good = [], []
    for weights, errors, rate, judge in itertools.product(WEIGHTS, ERRORS, RATES, JUDGES):
        out, bias = cell(rng, counts, weights, errors, rate, judge, args.repetitions)
        for n, row in out.items():
            if judge == 0.99 and n >= 20:
                good.append(row)
            valid = [width for cover, width in row.values() if cover >= 0.94 and not math.isnan(width)]
            ratio = row["after"][1] / min(valid) if valid else math.nan
            if judge == 0.99 and n >= 20:
                ratios.append(ratio)
            if n >= 20:
                for m in METHODS:
                    if row[m][0] < worst[m][0]:
                        worst[m] = (row[m][0], (weights, errors, rate, judge, n))
            cells = " | ".join(f"{100 * row[m][0]:.1f} % ({row[m][1]:.3f})" for m in METHODS)
            print(f"| {weights} | {errors} | {rate} | {judge} | {n} | {bias:+.3f} | {cells} | {ratio:.2f} |")
    print(f"\nlowest coverage with >= 20 labels: " +
          "; ".join(f"{m} {100 * c:.1f} % at {where}" for m, (c, where) in worst.items()))
    print(f"judge right 99 %, >= 20 labels: width of 'after' / narrowest interval covering >= 94 % in the cell: "
          f"median {np.nanmedian(ratios):.2f}, max {np.nanmax(ratios):.2f} over {len(ratios)} cells")
    valid = [m for m, (lowest, _) in worst.items() if lowest >= 0.94]
    if valid:
        against = [row["after"][1] / min(row[m][1] for m in valid) for row in good]
        print(f"valid in every cell with >= 20 labels (>= 94 %): {', '.join(valid)}; in the 99 %-judge cells 'after' is "
              f"{np.median(against):.2f}x (median), {np.max(against):.2f}x (max) the narrowest of them")
    else:
        print("no interval is valid in every cell with >= 20 labels")
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
