"""A sweep's answer to the second question, what each config costs: quality against p95 latency.

Written with the sweep summary (:mod:`~ragexp.tracking.sweep_summary`) when any child measured a
p95 latency (``cost.latency_p95_ms`` from ``cost.latency_queries``, or any other key
:func:`ragexp.cost.keys.latency_p95_key` matches, e.g. a black-box system's
``cost.endpoint_latency_p95_ms``):

- ``summary/quality_vs_latency.png`` (:mod:`~ragexp.tracking.cost_plot`): the quality metric
  against the p95 latency, the Pareto front (:mod:`ragexp.cost.pareto`) joined, dominated configs
  hollow, configs over a budget crossed;
- ``summary/cost.md``: one row per config: quality, p95 latency (± the spread of its repeats), index
  size, peak RSS, generation tokens per query, money per 1,000 queries, and its standing
  (``front``, ``dominated by <config>``, ``over budget``);
- the description's cost lines: the front, the dominated configs, **the cheapest config tied with
  the best** (the best's tie set on the quality metric, :mod:`ragexp.comparison.vs_best`, and its
  member with the lowest p95 latency), the configs over budget (left out of "best" when the sweep
  set ``cost.budgets``), how latency was measured;
- tags: parent ``cost.pareto_front`` and ``cost.cheapest_tied``; each child ``ragexp.pareto`` =
  ``front`` | ``dominated`` | ``over_budget``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragexp.comparison import vs_best
from ragexp.cost import keys, pareto
from ragexp.cost.budgets import OVER, Budget, BudgetVerdict
from ragexp.tracking import experiments
from ragexp.tracking.cost_plot import PlotPoint, draw_quality_vs_latency

PLOT = "quality_vs_latency.png"
TABLE = "cost.md"
TAG_PARETO = "ragexp.pareto"
FRONT, DOMINATED, OVER_BUDGET = "front", "dominated", "over_budget"
MB = 1024 * 1024


@dataclass(frozen=True)
class Config:
    """One child as the cost section reads it: ``values`` are its results-key metrics and costs."""

    run_id: str
    name: str
    values: Mapping[str, float]
    quality_half: float | None = None


@dataclass
class CostSummary:
    lines: list[str] = field(default_factory=list)  # for the run description (markdown)
    image: str | None = None  # artifact path of the plot
    parent_tags: dict[str, str] = field(default_factory=dict)
    child_tags: dict[str, dict[str, str]] = field(default_factory=dict)


def _ms(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else (f"{value:.1f}" if value >= 10 else f"{value:.2f}")


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value / MB:.1f}"


def _number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def cost_table(configs: Sequence[Config], quality: str, latency: str, standing: Mapping[str, str],
               names: Mapping[str, str]) -> str:
    """The ``summary/cost.md`` table, fastest first."""
    header = [quality, f"{latency} (ms)", "± spread", "index MB", "peak RSS MB", "gen tokens in/out per q",
              "money per 1k q", "standing"]
    lines = ["| config | " + " | ".join(header) + " |", "|---" * (1 + len(header)) + "|"]
    for config in sorted(configs, key=lambda c: c.values.get(latency, math.inf)):
        v = config.values
        tokens = (f"{v[keys.GEN_TOKENS_IN]:.0f} / {v[keys.GEN_TOKENS_OUT]:.0f}" if keys.GEN_TOKENS_IN in v
                  and keys.GEN_TOKENS_OUT in v else "–")
        state = standing.get(config.run_id, "")
        lines.append("| " + " | ".join([
            config.name, _number(v.get(quality), 4), _ms(v.get(latency)), _ms(v.get(latency + "_spread")),
            _mb(v.get(keys.INDEX_BYTES)), _mb(v.get(keys.PEAK_RSS_BYTES)), tokens,
            _number(v.get(keys.MONEY_PER_1K), 4), state if not state.startswith(DOMINATED) else
            f"dominated by {names.get(state.split(':', 1)[1], '?')}",
        ]) + " |")
    return "\n".join(lines) + "\n"


def summarize_cost(configs: Sequence[Config], quality: str, ties: Mapping[str, vs_best.VsBest],
                   verdicts: Mapping[str, Sequence[BudgetVerdict]], budgets: Sequence[Budget],
                   experiment_id: str, folder: Path, artifact_dir: str) -> CostSummary:
    """The cost section (module docstring); ``ties`` is the quality metric's standing among the
    configs within budget; files go to ``folder`` (logged as ``artifact_dir``)."""
    summary = CostSummary()
    names = {c.run_id: c.name for c in configs}
    over = {run for run, found in verdicts.items() if any(v.status == OVER for v in found)}
    budget_line = []
    if budgets:
        listed = "; ".join(str(b) for b in budgets)
        budget_line = [f"- Budgets ({listed}): " + (", ".join(names[run] for run in sorted(over, key=names.get))
                                                    + " over budget, left out of best." if over else "every config within.")]
    latency = keys.latency_p95_key({key for c in configs for key in c.values})
    if latency is None:
        if any(keys.is_cost(key) for c in configs for key in c.values):
            summary.lines = ["**Cost:** no p95 latency in these runs, so quality is not plotted against it: "
                             "`cost.latency_queries=20` serves 20 queries one at a time per config (docs/cost.md).",
                             *budget_line]
        return summary
    measured = [c for c in configs if latency in c.values and quality in c.values]
    points = [pareto.Point(c.run_id, c.values[quality], c.values[latency]) for c in measured if c.run_id not in over]
    on_front = {p.run_id for p in pareto.front(points)}
    beaten = pareto.dominated_by(points)
    standing = {run: f"{DOMINATED}:{by}" for run, by in beaten.items()}
    standing.update({run: FRONT for run in on_front})
    standing.update({run: OVER_BUDGET for run in over})
    tie_set = vs_best.tie_set(ties)
    cheapest = pareto.cheapest_tied(tie_set, {c.run_id: c.values[latency] for c in measured})
    best = tie_set[0] if tie_set else None

    def link(run: str) -> str:
        return f"[{names[run]}]({experiments.run_link(experiment_id, run)})"

    def at(run: str) -> str:
        values = next(c.values for c in configs if c.run_id == run)
        return f"{quality} {values[quality]:.4f}, p95 {_ms(values.get(latency))} ms"

    how = ""
    if latency == keys.LATENCY_P95_MS:
        how = (" Latency: each config served the same sampled queries one at a time on its warm index, every query "
               "timed over repeats and its median kept (`meta.cost.latency` in each run's results; docs/cost.md).")
    lines = [f"**Quality against cost** ({quality} vs `{keys.MLFLOW_PREFIX}{latency[len(keys.PREFIX):]}`).{how}", ""]
    if cheapest is not None and best is not None:
        if cheapest == best:
            lines.append(f"- Cheapest config tied with the best: the best itself, {link(best)} ({at(best)}).")
        else:
            lines.append(f"- **Cheapest config tied with the best:** {link(cheapest)} ({at(cheapest)}); the best, "
                         f"{link(best)} ({at(best)}), is not better by more than the paired test can tell.")
    lines.append(f"- Pareto front ({len(on_front)}): " + ", ".join(
        f"{names[p.run_id]} ({p.quality:.3f}, {_ms(p.cost)} ms)" for p in pareto.front(points)) + ".")
    if beaten:
        lines.append(f"- Dominated ({len(beaten)}, another config is at least as good and as fast): "
                     + ", ".join(f"{names[run]} (by {names[by]})" for run, by in beaten.items()) + ".")
    lines += budget_line
    unmeasured = [c.name for c in configs if c not in measured]
    if unmeasured:
        lines.append(f"- No {latency} for: {', '.join(unmeasured)}.")
    summary.lines = lines
    folder.mkdir(parents=True, exist_ok=True)
    latency_budget = next((b.limit for b in budgets if b.metric == latency and b.op == "<="), None)
    plot_points = [PlotPoint(label=c.name, quality=c.values[quality], latency_ms=c.values[latency],
                             quality_half=c.quality_half or 0.0, latency_spread=c.values.get(latency + "_spread", 0.0),
                             status=standing.get(c.run_id, FRONT).split(":")[0], best=c.run_id == best,
                             cheapest_tied=c.run_id == cheapest and cheapest != best)
                   for c in sorted(measured, key=lambda c: c.values[latency])]
    mlflow_key = keys.MLFLOW_PREFIX + latency[len(keys.PREFIX):]
    draw_quality_vs_latency(folder / PLOT, plot_points, quality, mlflow_key, latency_budget,
                            subtitle=f"whiskers: {quality} 95% CI, latency spread of the repeats")
    (folder / TABLE).write_text(cost_table(configs, quality, latency, standing, names), encoding="utf-8")
    summary.image = f"{artifact_dir}/{PLOT}"
    summary.parent_tags = {"cost.pareto_front": ", ".join(names[p.run_id] for p in pareto.front(points))[:5000]}
    if cheapest is not None:
        summary.parent_tags["cost.cheapest_tied"] = f"{names[cheapest]} (run {cheapest[:8]})"
    summary.child_tags = {run: {TAG_PARETO: state.split(":")[0]} for run, state in standing.items()}
    return summary
