"""Quality against cost: the Pareto front of a set of configs, the dominated ones, and the
cheapest config tied with the best.

A config is a point ``(quality, cost)``, quality higher-is-better (``hit_rate_at_5``), cost
lower-is-better (a p95 latency, :mod:`ragexp.cost.keys`). ``a`` **dominates** ``b`` when
``quality_a >= quality_b`` and ``cost_a <= cost_b`` with at least one strict; the **front** is the
set no config dominates (each one the best quality at its cost or below). A dominated config is
reported with the config that dominates it at the lowest cost.

"Best" is a set, not a run (:mod:`ragexp.comparison.vs_best`: the best config and those a paired
sign-flip test cannot tell from it). :func:`cheapest_tied` names the member of that set with the
lowest cost: the config to ship when quality cannot tell them apart. Front and dominance compare
the measured values as they are; whether a latency difference is beyond its noise is the gate's
question (the spread of the repeats, :mod:`ragexp.cost.latency`), and the summary states it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    run_id: str
    quality: float
    cost: float


def dominates(a: Point, b: Point) -> bool:
    return a.quality >= b.quality and a.cost <= b.cost and (a.quality > b.quality or a.cost < b.cost)


def front(points: Sequence[Point]) -> list[Point]:
    """The non-dominated points, cheapest first."""
    return sorted((p for p in points if not any(dominates(q, p) for q in points)), key=lambda p: (p.cost, -p.quality))


def dominated_by(points: Sequence[Point]) -> dict[str, str]:
    """``{dominated run: the cheapest run dominating it}``."""
    out = {}
    for p in points:
        dominating = [q for q in points if dominates(q, p)]
        if dominating:
            out[p.run_id] = min(dominating, key=lambda q: (q.cost, -q.quality)).run_id
    return out


def cheapest_tied(tie_set: Sequence[str], costs: Mapping[str, float]) -> str | None:
    """The run of ``tie_set`` (the best and the runs tied with it) with the lowest cost; among
    equal costs the first of ``tie_set`` (the best first). ``None`` when none has a cost."""
    priced = [run for run in tie_set if run in costs]
    return min(priced, key=lambda run: costs[run]) if priced else None
