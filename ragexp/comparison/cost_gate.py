"""The gate's cost checks: a cost metric against the baseline's (a relative or absolute tolerance,
widened to the measurement noise), and budgets the candidate alone must keep.

A cost is one number per run (``cost.latency_p95_ms``, ``cost.index_bytes`` ...: the run's
aggregate, :mod:`ragexp.cost`), not a mean over paired queries, so it is compared as a number:

- ``worse = candidate - baseline`` (``baseline - candidate`` for a throughput, ``*_qps``);
- ``tolerance``: ``{relative: r}`` -> ``r * |baseline|``, ``{absolute: x}`` -> ``x``; ``auto`` (the
  spec default, meant for per-query metrics) means :data:`DEFAULT_RELATIVE` for a cost;
- noise: a latency measured over repeats carries ``<metric>_spread`` (max - min of the p95s of
  single repeats, :mod:`ragexp.cost.latency`); the noise of the difference is taken as the mean of
  the two runs' spreads, and the tolerance in force is ``max(tolerance, noise)``: a difference the
  repeats themselves produce never fails the gate;
- verdict ``regression`` when ``worse`` exceeds the tolerance in force, else ``pass``. No p-value:
  the repeats are not queries, and a one-number comparison has no pairing to test.

Budgets (:mod:`ragexp.cost.budgets`) are read on the candidate only: over a budget fails the gate
whatever the baseline did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragexp.cost.budgets import SPREAD_SUFFIX
from ragexp.cost.keys import higher_is_better

DEFAULT_RELATIVE = 0.10
PASS, REGRESSION = "pass", "regression"


@dataclass
class CostVerdict:
    metric: str
    baseline: float
    candidate: float
    worse: float  # > 0: the candidate costs more
    tolerance: float  # in force: max(rule tolerance, noise)
    tolerance_rule: str
    noise: float | None
    verdict: str


def compare_cost(metric: str, tolerance_kind: str, tolerance_value: float, baseline: Mapping[str, float],
                 candidate: Mapping[str, float]) -> CostVerdict:
    """One cost metric of two runs' aggregates (module docstring)."""
    base, cand = float(baseline[metric]), float(candidate[metric])
    worse = (base - cand) if higher_is_better(metric) else (cand - base)
    if tolerance_kind == "absolute":
        allowed, rule = tolerance_value, f"abs {tolerance_value:g}"
    else:
        relative = tolerance_value if tolerance_kind == "relative" else DEFAULT_RELATIVE
        allowed, rule = relative * abs(base), f"rel {relative:.0%}"
    spreads = [runs[metric + SPREAD_SUFFIX] for runs in (baseline, candidate) if metric + SPREAD_SUFFIX in runs]
    noise = sum(spreads) / len(spreads) if spreads else None
    if noise is not None and noise > allowed:
        rule += f", widened to the repeats' spread {noise:.3g}"
    in_force = max(allowed, noise or 0.0)
    return CostVerdict(metric, base, cand, worse, in_force, rule, noise, REGRESSION if worse > in_force else PASS)
