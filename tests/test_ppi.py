"""Prediction-powered inference (:mod:`ragexp.judging.ppi`) against the independent implementation
``ppi_py`` (``ppi-python``, a test dependency) and against sampling truth.

``ppi_py.ppi_mean_ci``'s default (``lam=None``) is PPI++: it tunes a factor ``lambda`` on the
predictions. ragexp implements plain PPI (``lambda = 1``), so every comparison passes ``lam=1``;
the one test that calls the default shows that it is a different estimator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (test extra) is not installed")

from ragexp.judging.ppi import (  # noqa: E402
    Unit,
    allocate,
    draw_across,
    labels_needed,
    ppi_estimate,
    ppi_mean,
    allocate_design,
    design_strata,
    exact,
    weight_classes,
    z_of,
)

EXACT = 1e-9


def synthetic(seed: int, n_all: int = 800, n: int = 60, binary: bool = False):
    rng = np.random.default_rng(seed)
    truth = rng.random(n_all) < 0.6
    if binary:
        judged = (truth | (rng.random(n_all) < 0.3)).astype(float)  # a lenient judge
        labels = truth.astype(float)
    else:
        labels = truth + rng.normal(0, 0.3, n_all)
        judged = labels + rng.normal(0.2, 0.5, n_all)
    picked = rng.choice(n_all, n, replace=False)
    return labels[picked], judged[picked], judged


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("binary", [False, True])
def test_one_stratum_equals_ppi_py_without_power_tuning(seed: int, binary: bool) -> None:
    y, f, f_all = synthetic(seed, binary=binary)
    estimate, variance = ppi_mean(y, f, f_all)
    assert estimate == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=1)[0]), abs=EXACT)
    for confidence in (0.9, 0.95, 0.99):
        (low,), (high,) = ppi_py.ppi_mean_ci(y, f, f_all, alpha=1 - confidence, lam=1)
        half = z_of(confidence) * math.sqrt(variance)
        assert (estimate - half, estimate + half) == pytest.approx((low, high), abs=EXACT)


@pytest.mark.parametrize("seed", range(3))
def test_weighted_units_equal_ppi_py_with_weights(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    y, f, f_all = synthetic(seed)
    w, w_all = rng.random(y.size) + 0.1, rng.random(f_all.size) + 0.1
    estimate, variance = ppi_mean(y, f, f_all, w, w_all)
    assert estimate == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=1, w=w, w_unlabeled=w_all)[0]),
                                     abs=EXACT)
    (low,), (high,) = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05, lam=1, w=w, w_unlabeled=w_all)
    assert estimate - z_of(0.95) * math.sqrt(variance) == pytest.approx(low, abs=EXACT)
    assert estimate + z_of(0.95) * math.sqrt(variance) == pytest.approx(high, abs=EXACT)


def test_ppi_py_default_is_power_tuned_and_differs() -> None:
    y, f, f_all = synthetic(7)
    estimate, _ = ppi_mean(y, f, f_all)
    assert abs(float(ppi_py.ppi_mean_pointestimate(y, f, f_all)[0]) - estimate) > 1e-4


def test_stratified_estimate_is_the_weighted_sum_of_per_stratum_ppi_py() -> None:
    """Three strata of continuous predictions: theta^ = sum_h W_h * ppi_py(h), var = sum_h W_h^2 var_h."""
    rng = np.random.default_rng(5)
    units, labels, parts = [], {}, []
    for h, (size, n) in enumerate([(300, 20), (150, 25), (50, 10)]):
        y_all = rng.random(size) + h
        f_all = y_all + rng.normal(-0.3, 0.4, size)
        ids = [f"{h}-{i}" for i in range(size)]
        units += [Unit(i, float(p), 1.0, f"s{h}") for i, p in zip(ids, f_all)]
        picked = rng.choice(size, n, replace=False)
        labels.update({ids[i]: float(y_all[i]) for i in picked})
        est = float(ppi_py.ppi_mean_pointestimate(y_all[picked], f_all[picked], f_all, lam=1)[0])
        (low,), _ = ppi_py.ppi_mean_ci(y_all[picked], f_all[picked], f_all, alpha=0.05, lam=1)
        parts.append((size / 500, est, ((est - low) / z_of(0.95)) ** 2))
    result = ppi_estimate(units, labels)
    assert result.interval == "clt"
    assert result.estimate == pytest.approx(sum(w * e for w, e, _ in parts), abs=EXACT)
    assert result.se == pytest.approx(math.sqrt(sum(w * w * v for w, _, v in parts)), abs=EXACT)
    assert (result.low, result.high) == (result.clt_low, result.clt_high)


def verdict_units(rng, size: int, rate: float, lenient: float):
    truth = rng.random(size) < rate
    judged = truth | (rng.random(size) < lenient) & ~truth
    units = [Unit(str(i), float(j), 1.0, "supported" if j else "not_supported") for i, j in enumerate(judged)]
    return units, truth


def test_verdict_strata_estimate_is_the_post_stratified_human_share() -> None:
    """With the judge's verdict as strata, theta^ = sum_v (N_v / N) * (human-supported share of v's labels)."""
    rng = np.random.default_rng(11)
    units, truth = verdict_units(rng, 400, 0.6, 0.3)
    sample = draw_across(units, 40, seed=1, stratum_of=lambda u: u.stratum)
    labels = {u.id: float(truth[int(u.id)]) for u in sample}
    result = ppi_estimate(units, labels)
    expected = 0.0
    for verdict in ("supported", "not_supported"):
        members = [u for u in units if u.stratum == verdict]
        labelled = [labels[u.id] for u in members if u.id in labels]
        expected += len(members) / 400 * sum(labelled) / len(labelled)
    assert result.estimate == pytest.approx(expected, abs=EXACT)
    assert result.judge_mean == pytest.approx(np.mean([u.prediction for u in units]), abs=EXACT)
    assert result.interval == "exact-mover" and result.low <= result.estimate <= result.high


def test_the_exact_interval_holds_the_binomial_tails_and_collapses_when_all_are_labelled() -> None:
    """Clopper-Pearson by its definition: at the lower bound P(X >= x) = a/2, at the upper P(X <= x) = a/2
    (scipy's binomial tails); 0 successes has lower bound 0, all successes upper bound 1."""
    from scipy.stats import binom

    for x, n in ((3, 10), (0, 12), (12, 12), (7, 20)):
        low, high = exact(x / n, n, 0.95)
        if x > 0:
            assert binom.sf(x - 1, n, low) == pytest.approx(0.025, abs=1e-9)
        else:
            assert low == 0.0
        if x < n:
            assert binom.cdf(x, n, high) == pytest.approx(0.025, abs=1e-9)
        else:
            assert high == 1.0
    assert exact(0.4, 0, 0.95) == (0.0, 1.0) and exact(0.4, math.inf, 0.95) == (0.4, 0.4)
    units = [Unit(str(i), float(i % 2), 1.0, str(i % 2)) for i in range(10)]
    every = ppi_estimate(units, {str(i): float(i % 3 == 0) for i in range(10)})
    assert every.low == every.estimate == every.high == pytest.approx(0.4)


def test_an_unlabelled_stratum_keeps_the_judge_and_widens_to_its_bounds() -> None:
    units = [Unit(str(i), 1.0 if i < 8 else 0.0, 1.0, "s" if i < 8 else "n") for i in range(10)]
    result = ppi_estimate(units, {"0": 1.0, "1": 0.0})
    assert result.uncorrected_strata == ["n"]
    assert result.estimate == pytest.approx(0.8 * 0.5 + 0.2 * 0.0)
    assert result.clt_low is None and result.high - result.estimate >= 0.2 - 1e-12


def test_the_wilson_mover_interval_covers_the_finite_population_rate() -> None:
    """400 claims, a judge that calls 30 % of unsupported claims supported, 20 labels drawn across
    verdicts: over 400 draws the logged interval holds the true share at least 93 % of the time."""
    rng = np.random.default_rng(3)
    units, truth = verdict_units(rng, 400, 0.55, 0.3)
    covered = 0
    for seed in range(400):
        sample = draw_across(units, 20, seed, lambda u: u.stratum)
        result = ppi_estimate(units, {u.id: float(truth[int(u.id)]) for u in sample})
        covered += result.low <= truth.mean() <= result.high
    assert covered / 400 >= 0.93


def test_allocation_is_balanced_capped_and_nested() -> None:
    assert allocate(20, {"a": 100, "b": 100}) == {"a": 10, "b": 10}
    assert allocate(20, {"a": 100, "b": 4}) == {"a": 16, "b": 4}
    assert allocate(500, {"a": 3, "b": 4}) == {"a": 3, "b": 4}
    items = [Unit(str(i), float(i % 3 == 0), 1.0, str(i % 3 == 0)) for i in range(60)]
    small = draw_across(items, 10, 4, lambda u: u.stratum)
    large = draw_across(items, 30, 4, lambda u: u.stratum)
    assert set(u.id for u in small) <= set(u.id for u in large)
    assert small == draw_across(items, 10, 4, lambda u: u.stratum) == sorted(small, key=lambda u: u.id)
    assert sum(u.stratum == "True" for u in small) == 5


def test_labels_needed_reaches_the_width_it_promises() -> None:
    """The planned labels, plugged into the CLT variance formula with the current shares (Agresti-
    Coull shrunk), give an interval no wider than asked; one label less does not."""
    rng = np.random.default_rng(9)
    units, truth = verdict_units(rng, 1000, 0.6, 0.3)
    sample = draw_across(units, 20, 0, lambda u: u.stratum)
    result = ppi_estimate(units, {u.id: float(truth[int(u.id)]) for u in sample})
    z = z_of(0.95)

    def width(total: int) -> float:
        counts = allocate(total, {s.name: s.units for s in result.strata})
        var = 0.0
        for s in result.strata:
            p = (s.estimate * s.labels + z * z / 2) / (s.labels + z * z)
            var += s.weight**2 * p * (1 - p) * (1 - counts[s.name] / s.units) / counts[s.name]
        return 2 * z * math.sqrt(var)

    more = labels_needed(result, 0.1)
    assert 0 < more < 980
    assert width(20 + more) <= 0.1 < width(20 + more - 1)
    assert labels_needed(result, 2.0) == 0


def test_labels_needed_leaves_out_a_stratum_known_by_construction() -> None:
    """Claims against an empty context are labelled without a person: they need no more labels."""
    units = [Unit(f"e{i}", 0.0, 1.0, "empty_context") for i in range(50)]
    units += [Unit(f"s{i}", 1.0, 1.0, "supported") for i in range(10)]
    labels = {**{f"e{i}": 0.0 for i in range(50)}, **{f"s{i}": float(i % 2) for i in range(4)}}
    result = ppi_estimate(units, labels)
    assert labels_needed(result, 1e-6) == 6  # the rest of the supported stratum, nothing of the empty one


def test_a_transfer_uses_the_targets_verdict_shares_and_the_sources_rates() -> None:
    """Source: judge-supported claims 6 of 8 labelled supported, judge-unsupported 1 of 4; target:
    30 % of its claims judged supported -> 0.3 * 6/8 + 0.7 * 1/4, each rate with its exact interval."""
    from ragexp.judging.ppi import transferred_estimate

    source = [Unit(f"s{i}", 1.0, 1.0, "supported") for i in range(8)] + [Unit(f"n{i}", 0.0, 1.0, "not") for i in range(4)]
    labels = {**{f"s{i}": float(i < 6) for i in range(8)}, **{f"n{i}": float(i < 1) for i in range(4)}}
    target = [Unit(f"t{i}", float(i < 30), 1.0, "supported" if i < 30 else "not") for i in range(100)]
    result = transferred_estimate(target, source, labels)
    assert result.estimate == pytest.approx(0.3 * 0.75 + 0.7 * 0.25, abs=EXACT)
    assert result.judge_mean == pytest.approx(0.3)
    (ls, hs), (ln, hn) = exact(0.75, 8, 0.95), exact(0.25, 4, 0.95)
    assert result.low == pytest.approx(result.estimate - math.hypot(0.3 * (0.75 - ls), 0.7 * (0.25 - ln)), abs=EXACT)
    assert result.high == pytest.approx(result.estimate + math.hypot(0.3 * (hs - 0.75), 0.7 * (hn - 0.25)), abs=EXACT)
    with pytest.raises(ValueError, match="verdict strata"):
        transferred_estimate([Unit("x", 0.3), Unit("y", 0.6)], source, labels)


def test_allocation_equals_dealing_one_draw_per_stratum_in_turn() -> None:
    """The closed form against its definition: deal draws round by round, one to each stratum with
    units left, in name order, until n are dealt."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        sizes = {f"s{i}": int(rng.integers(0, 30)) for i in range(int(rng.integers(1, 5)))}
        n = int(rng.integers(0, 100))
        dealt = dict.fromkeys(sizes, 0)
        left = min(n, sum(sizes.values()))
        while left:
            for name in sorted(sizes):
                if left and dealt[name] < sizes[name]:
                    dealt[name] += 1
                    left -= 1
        assert allocate(n, sizes) == dealt, (n, sizes)


def test_labels_needed_is_quick_on_a_large_run() -> None:
    units = [Unit(str(i), float(i % 4 != 0), 1.0, str(i % 4 != 0)) for i in range(40_000)]
    result = ppi_estimate(units, {str(i): float(i % 8 != 0) for i in range(40)})
    assert 0 < labels_needed(result, 0.02) < 40_000


def query_mean_units(rng, queries: int = 120):
    """A run whose short answers are the hard ones: one-claim answers mostly unsupported and judged
    supported, long answers mostly supported; query-mean weights ``1 / (Q m_q)``."""
    counts = rng.choice(np.arange(1, 13), queries, p=(p := 1 / np.sqrt(np.arange(1, 13))) / p.sum())
    units, truth = [], {}
    for q, m in enumerate(counts):
        for i in range(m):
            short = m <= 2
            y = rng.random() < (0.3 if short else 0.9)
            f = y if rng.random() < (0.6 if short else 0.95) else not y
            unit_id = f"q{q:03d}#{i:02d}"
            units.append(Unit(unit_id, float(f), 1.0 / (queries * m), "supported" if f else "not_supported"))
            truth[unit_id] = float(y)
    return units, truth


def test_weight_classes_split_a_verdict_at_its_weighted_median_only_when_weights_differ() -> None:
    assert weight_classes([1.0, 1.5, 2.0]) == ["", "", ""]  # within the factor 2: one class
    assert weight_classes([1.0] * 6 + [12.0]) == ["light"] * 6 + ["heavy"]  # 12 of 18 in the heavy unit
    classes = weight_classes([1 / m for m in range(1, 13) for _ in range(m)])  # 12 answers of 1..12 claims
    heavy = [w for w, c in zip([1 / m for m in range(1, 13) for _ in range(m)], classes) if c == "heavy"]
    assert sum(heavy) >= 6 > sum(heavy) - min(heavy)  # the heaviest units holding half of the weight
    units = [Unit(str(i), 1.0, w, "supported") for i, w in enumerate([1.0, 1.0, 0.1, 0.1])] + [Unit("n", 0.0, 1.0, "not")]
    assert design_strata(units) == ["supported|heavy"] * 2 + ["supported|light"] * 2 + ["not"]


def test_the_design_allocation_is_balanced_across_verdicts_then_classes_and_nested() -> None:
    sizes = {"s|heavy": 30, "s|light": 300, "n": 40}
    assert allocate_design(20, sizes) == {"s|heavy": 5, "s|light": 5, "n": 10}
    previous = dict.fromkeys(sizes, 0)
    for n in range(0, 371):
        counts = allocate_design(n, sizes)
        assert sum(counts.values()) == min(n, 370) and all(counts[k] >= previous[k] for k in sizes)
        previous = counts


def test_the_design_estimate_is_the_sum_of_ppi_py_per_design_stratum() -> None:
    """Where the designs coincide (a simple random sample within each design stratum), the estimate and
    the CLT interval are ppi_py's per stratum, summed with the strata's weight shares."""
    rng = np.random.default_rng(21)
    units, truth = query_mean_units(rng)
    strata = design_strata(units)
    units = [Unit(u.id, u.prediction, u.weight, s) for u, s in zip(units, strata)]
    sample = draw_across(units, 40, 3, lambda u: u.stratum)
    result = ppi_estimate(units, {u.id: truth[u.id] for u in sample})
    total = sum(u.weight for u in units)
    estimate = variance = 0.0
    for name in set(strata):
        members = [u for u in units if u.stratum == name]
        picked = [u for u in sample if u.stratum == name]
        y, f = np.array([truth[u.id] for u in picked]), np.array([u.prediction for u in picked])
        share = sum(u.weight for u in members) / total
        args = (y, f, np.array([u.prediction for u in members]))
        weights = {"w": np.array([u.weight for u in picked]), "w_unlabeled": np.array([u.weight for u in members])}
        estimate += share * float(ppi_py.ppi_mean_pointestimate(*args, lam=1, **weights)[0])
        (low,), (high,) = ppi_py.ppi_mean_ci(*args, alpha=0.05, lam=1, **weights)
        variance += (share * (high - low) / (2 * z_of(0.95))) ** 2
    assert result.estimate == pytest.approx(estimate, abs=EXACT)
    assert (result.clt_low, result.clt_high) == pytest.approx(
        (estimate - z_of(0.95) * math.sqrt(variance), estimate + z_of(0.95) * math.sqrt(variance)), abs=EXACT)


def test_the_logged_interval_covers_when_short_answers_are_the_hard_ones() -> None:
    """The issue's shape: one-claim answers weigh 12 times a claim of a 12-claim answer and are where
    the judge errs. 20 labels drawn by the design (verdict, then weight class) over 300 draws: the
    logged interval holds the true query mean at least 93 % of the time (the 1,000-repetition grid of
    benchmarks/ppi_coverage.py measures the rest)."""
    rng = np.random.default_rng(8)
    units, truth = query_mean_units(rng)
    units = [Unit(u.id, u.prediction, u.weight, s) for u, s in zip(units, design_strata(units))]
    target = sum(u.weight * truth[u.id] for u in units) / sum(u.weight for u in units)
    covered = 0
    for seed in range(300):
        sample = draw_across(units, 20, seed, lambda u: u.stratum)
        result = ppi_estimate(units, {u.id: truth[u.id] for u in sample})
        covered += result.low <= target <= result.high
    assert covered / 300 >= 0.93
