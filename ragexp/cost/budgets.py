"""Budgets: limits a run must keep, ``cost/latency_p95_ms <= 250`` or ``cost.index_bytes<=2e9``.

One grammar, owned here (:func:`parse_budget`), for the gate (``--budget``, the spec's
``budgets:``) and the sweep (``cost.budgets``): ``<metric> <= <number>`` or ``<metric> >=
<number>``, the metric a results key (``cost.latency_p95_ms``, ``hit_rate_at_5``) or its MLflow
form (``cost/latency_p95_ms``), the number finite (``250``, ``2e9``). Anything else is refused
with one line.

:func:`check` reads the run's aggregate: ``over`` when it breaks the limit, ``unmeasured`` when the
run has no such value, else ``within``. Latency is noisy: a run that measured the repeats' spread
(``<metric>_spread``, :mod:`ragexp.cost.latency`) and keeps the limit by less than that spread is
``within`` with a note, ``near`` (it may break it on the next run); the verdict itself is the
median-of-repeats value against the limit, nothing else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ragexp.cost.keys import results_key
from ragexp.errors import RagexpInputError

WITHIN, OVER, UNMEASURED = "within", "over", "unmeasured"
_BUDGET = re.compile(r"\s*(?P<metric>[A-Za-z0-9_][A-Za-z0-9_./-]{0,199})\s*(?P<op><=|>=)\s*(?P<limit>[0-9eE.+-]{1,40})\s*")
SPREAD_SUFFIX = "_spread"


@dataclass(frozen=True)
class Budget:
    """``metric op limit``, the metric as a results key."""

    metric: str
    op: str
    limit: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}"

    def keeps(self, value: float) -> bool:
        return value <= self.limit if self.op == "<=" else value >= self.limit


@dataclass(frozen=True)
class BudgetVerdict:
    budget: Budget
    value: float | None
    status: str  # within | over | unmeasured
    spread: float | None = None

    @property
    def near(self) -> bool:
        """Within the limit by less than the measured spread of the repeats."""
        return (self.status == WITHIN and self.spread is not None and self.value is not None
                and abs(self.budget.limit - self.value) < self.spread)

    def describe(self) -> str:
        if self.status == UNMEASURED:
            return f"{self.budget}: not measured in this run"
        spread = f" (spread of the repeats {self.spread:g})" if self.spread is not None else ""
        verdict = {OVER: "OVER BUDGET", WITHIN: "within budget"}[self.status]
        near = ", within the repeats' spread of the limit" if self.near else ""
        return f"{self.budget}: {self.value:g}{spread}: {verdict}{near}"


def parse_budget(text: str, field: str = "budget") -> Budget:
    """``"cost/latency_p95_ms <= 250"`` -> :class:`Budget` (module docstring)."""
    if not isinstance(text, str):
        raise RagexpInputError(f"a budget is a string '<metric> <= <number>', got {type(text).__name__}", field=field)
    match = _BUDGET.fullmatch(text)
    if match is None:
        raise RagexpInputError(f"not a budget: {text[:80]!r}; write '<metric> <= <number>' or '<metric> >= <number>', "
                               "e.g. 'cost/latency_p95_ms <= 250'", field=field)
    try:
        limit = float(match["limit"])
    except ValueError:
        limit = math.nan
    if not math.isfinite(limit):
        raise RagexpInputError(f"the limit of {text[:80]!r} is not a finite number", field=field)
    return Budget(results_key(match["metric"]), match["op"], limit)


def check(budget: Budget, aggregates: Mapping[str, float]) -> BudgetVerdict:
    """The run's value of the budget's metric against its limit (module docstring)."""
    value = aggregates.get(budget.metric)
    if value is None or math.isnan(value):
        return BudgetVerdict(budget, None, UNMEASURED)
    spread = aggregates.get(budget.metric + SPREAD_SUFFIX)
    return BudgetVerdict(budget, float(value), WITHIN if budget.keeps(float(value)) else OVER, spread)
