"""Paired statistics: exact test vs brute force, Monte Carlo vs exact, CI and tolerance formulas."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ragexp.metrics import stats


def brute_force_sign_flip_p(a, b) -> float:
    """Independent reference: enumerate every sign vector over all n pairs, means not sums."""
    d = [y - x for x, y in zip(a, b)]
    observed = abs(sum(d) / len(d))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        hits += abs(sum(s * v for s, v in zip(signs, d)) / len(d)) >= observed - 1e-12
    return hits / 2 ** len(d)


SMALL_CASES = {
    "continuous": (np.random.default_rng(1).random(11), np.random.default_rng(2).random(11)),
    "binary_with_zeros": ([1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0], [0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0]),
    "ties_in_magnitude": ([0.5, 0.2, 0.9, 0.1, 0.3, 0.7, 0.4, 0.6], [0.3, 0.4, 0.7, 0.3, 0.1, 0.9, 0.2, 0.8]),
    "one_sided": ([1.0] * 10, [0.8, 0.9, 0.7, 1.0, 0.85, 0.95, 0.6, 0.9, 0.75, 1.0]),
    "mrr_like": ([1, 0.5, 1 / 3, 1, 0.25, 1, 0.5, 0, 1, 1 / 3], [1, 1, 0.5, 0.5, 0.25, 1, 1 / 3, 0.2, 1, 0.5]),
}


@pytest.mark.parametrize("case", SMALL_CASES)
def test_exact_sign_flip_matches_brute_force_enumeration(case):
    a, b = SMALL_CASES[case]
    assert stats.exact_sign_flip_test(a, b) == pytest.approx(brute_force_sign_flip_p(a, b), abs=1e-12)


@pytest.mark.parametrize("case", SMALL_CASES)
def test_monte_carlo_agrees_with_exact_within_mc_error(case):
    a, b = SMALL_CASES[case]
    exact = stats.exact_sign_flip_test(a, b)
    resamples = 20_000
    mc = stats.paired_randomization_test(a, b, n_resamples=resamples, seed=3)
    mc_error = math.sqrt(max(exact * (1 - exact), 1 / resamples) / resamples)
    assert abs(mc - exact) <= 4 * mc_error + 1 / resamples


def test_exact_p_for_six_lost_hits_is_two_extreme_flips_out_of_sixty_four():
    a, b = np.ones(120), np.ones(120)
    b[:6] = 0.0
    assert stats.exact_sign_flip_test(a, b) == pytest.approx(2 / 64)


def test_monte_carlo_p_value_is_never_zero():
    a, b = np.zeros(30), np.full(30, 0.5)
    assert stats.paired_randomization_test(a, b, n_resamples=999, seed=0) == pytest.approx(1 / 1000)


def test_identical_runs_have_p_one_and_a_zero_width_ci():
    values = np.random.default_rng(0).random(50)
    assert stats.paired_randomization_test(values, values) == 1.0
    assert stats.exact_sign_flip_test(values, values) == 1.0
    assert stats.paired_bootstrap_ci(values, values) == (0.0, 0.0)


def test_exact_test_refuses_too_many_nonzero_differences_and_dispatch_falls_back_to_monte_carlo():
    a, b = np.zeros(stats.EXACT_MAX_N + 1), np.arange(1.0, stats.EXACT_MAX_N + 2)
    with pytest.raises(ValueError, match="too many"):
        stats.exact_sign_flip_test(a, b)
    assert stats.sign_flip_p_value(a, b, n_resamples=500) == pytest.approx(1 / 501)


def test_randomization_test_is_calibrated_under_the_null():
    rng = np.random.default_rng(7)
    p_values = [
        stats.paired_randomization_test(base, base + rng.normal(0, 0.2, 40), n_resamples=400, seed=i)
        for i, base in enumerate(rng.random((300, 40)))
    ]
    assert 0.02 <= np.mean(np.array(p_values) < 0.05) <= 0.09


def test_paired_bootstrap_removes_between_query_variance():
    a = np.random.default_rng(0).random(200)
    assert stats.paired_bootstrap_ci(a, a + 0.1) == pytest.approx((0.1, 0.1))


def test_bootstrap_ci_matches_normal_theory_and_is_seeded():
    x = np.random.default_rng(0).normal(0.6, 0.2, 400)
    low, high = stats.bootstrap_ci(x, seed=5)
    half_width = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert low < x.mean() < high
    assert (high - low) / 2 == pytest.approx(half_width, rel=0.1)
    assert stats.bootstrap_ci(x, seed=5) == (low, high)
    assert stats.bootstrap_ci(x, seed=6) != (low, high)


def test_bootstrap_ci_coverage_is_near_nominal():
    rng = np.random.default_rng(11)
    covered = [
        low <= 0.7 <= high
        for low, high in (stats.bootstrap_ci(rng.random(60) < 0.7, n_resamples=1000, seed=i) for i in range(300))
    ]
    assert 0.89 <= np.mean(covered) <= 0.99


def test_bootstrap_cis_equal_one_ci_per_sample_with_its_own_draws():
    """Samples sharing a size share draws; each CI is still what an independent bootstrap of that
    sample with the same seed gives (reference: one draw matrix per sample, by hand)."""
    rng = np.random.default_rng(4)
    samples = {"mrr": rng.random(200), "hit": rng.random(200) < 0.6, "tagged": rng.random(37), "ndcg": rng.random(200)}

    def reference(x, seed=3, resamples=1500):
        x = np.asarray(x, dtype=np.float64)
        index = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size), dtype=np.int32)
        low, high = np.quantile(x[index].mean(axis=1), [0.025, 0.975])
        return float(low), float(high)

    cis = stats.bootstrap_cis(samples, n_resamples=1500, seed=3)
    assert list(cis) == list(samples)
    assert cis == {key: reference(x) for key, x in samples.items()}
    assert cis["mrr"] != cis["ndcg"]


def test_mean_ci_reports_mean_bounds_and_n():
    result = stats.mean_ci([1.0, 0.0, 1.0, 1.0])
    assert result.mean == 0.75 and result.n == 4
    assert 0.0 <= result.low <= result.mean <= result.high <= 1.0


def test_empty_or_nan_input_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        stats.mean_ci([])
    with pytest.raises(ValueError, match="NaN"):
        stats.bootstrap_ci([0.5, float("nan")])
    with pytest.raises(ValueError, match="length"):
        stats.paired_bootstrap_ci([1.0, 2.0], [1.0])


def test_auto_tolerance_formula_and_floor():
    diffs = np.zeros(120)
    diffs[:6] = -1.0
    expected = 1.96 * np.std(diffs, ddof=1) / math.sqrt(120)
    assert stats.auto_tolerance(diffs) == pytest.approx(expected)
    assert stats.auto_tolerance(diffs) == pytest.approx(0.0392, abs=1e-4)
    assert stats.auto_tolerance(np.zeros(120)) == pytest.approx(1 / 120)
    assert stats.auto_tolerance(np.zeros(120), floor_queries=2) == pytest.approx(2 / 120)


def test_tolerance_shrinks_with_eval_set_size():
    assert stats.recommended_tolerance(100) == pytest.approx(1.96 * 0.04)
    assert stats.recommended_tolerance(100, z=1.0) == pytest.approx(0.04)
    assert stats.recommended_tolerance(50) > stats.recommended_tolerance(100) > stats.recommended_tolerance(500)
    assert stats.recommended_tolerance(500) == pytest.approx(1.96 * math.sqrt(0.8 * 0.2 / 500))
    assert stats.recommended_tolerance(4, p=1.0) == pytest.approx(0.25)


def test_recommended_tolerance_is_the_auto_band_of_a_change_flipping_p_one_minus_p_of_outcomes():
    n = 1000
    diffs = np.zeros(n)
    diffs[:80], diffs[80:160] = 1.0, -1.0
    assert stats.auto_tolerance(diffs) == pytest.approx(stats.recommended_tolerance(n), rel=0.01)
