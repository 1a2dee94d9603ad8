"""A sweep's parent run holds the sweep's answer: which variant won on each headline metric.

Written when the sweep ends, from its FINISHED child runs:

- ties with the best (:mod:`ragexp.comparison.vs_best`): per headline metric with per-query
  values, every child is paired with the best child on their common queries (sign-flip test,
  Bonferroni over the K - 1 comparisons) and tagged ``ragexp.vs_best.<metric>`` = ``best`` |
  ``tied`` | ``worse``; every child but the best on hit rate@5 gets ``vs_best/per_query.html``
  and ``.json`` (:mod:`ragexp.comparison.per_query_diff`: the queries it wins and loses against
  that best, at k=5);
- ``summary/heatmap_<metric>.png`` per headline metric: the first sweep axis (rows) against the
  second (columns), one panel per value combination of the other axes (beyond
  :data:`MAX_PANELS` panels a cell shows the best over the other axes, and the title says so);
  every cell shows value ± its CI half-width, the best cell in bold and outlined, tied cells
  dashed; the colour scale is anchored to the noise (:func:`~ragexp.tracking.heatmap.anchored_scale`)
  and drawn as a colour bar;
- ``summary/compare.md`` and ``summary/compare.html``: runs x axis values x headline metrics,
  best hit rate@5 first, the best value of each metric in bold, values tied with it marked ``≈``;
- tags ``best.<metric>`` = ``<run name> = <value> (run <id[:8]>)`` per headline metric, ``, tied:
  N more`` when other runs are indistinguishable from it (marked not comparable across chunkings
  when the gold is whole documents and the runs chunk differently);
- the run's description (``mlflow.note.content``, shown on its overview page): the best run per
  headline metric with a link and its tie set ("3 configs are indistinguishable on hit_rate_at_5
  at n=131: ..."), the noise line per metric (:func:`ragexp.comparison.vs_best.noise_line`), the
  hit rate@5 heatmap, the compare table;
- every child's ``ragexp.decision`` tag (:func:`decision`: ``best · 0.855 ± 0.057``), and the
  parent's (``sweep · 5/18 best or tied · heatmaps``);
- the experiment's ragexp view (:mod:`~ragexp.tracking.experiments`) gets the sweep's axes as
  columns and parallel-coordinates axes, the decision column first;
- quality against cost (:mod:`~ragexp.tracking.cost_summary`): the plot of quality against p95
  latency with the Pareto front, ``summary/cost.md``, the cheapest config tied with the best;
- with ``tracking.traces=best`` (the default), the runs best or tied on hit rate@5 get one MLflow
  trace per query (:func:`trace_winners`), so GenAI -> Evaluation runs opens their queries.

Budgets (``cost.budgets``, recorded on the parent as ``ragexp.sweep_budgets``): a config over any
budget (:mod:`ragexp.cost.budgets`) is left out of "best" (best tags, tie tests, the tie set; its
``ragexp.vs_best.<metric>`` tag says ``over_budget``), as AutoRAG's ``speed_threshold`` does; it
stays in the tables and heatmaps.

Judge metrics (:func:`ragexp.judging.review_status.is_judge_metric`): a child with a
human-corrected estimate (``ppi.<metric>``, :mod:`ragexp.evaluation.corrected`) is summarised by that
estimate and its interval instead of the judge's value; the description's first lines say which
children's values are PPI estimates and which are "judge only, uncorrected", and name the judge
metrics that are *unverified*: no review of the child's judge (its ``ragexp.judge_key`` tag) on the
child or on a run sharing its judge, generator and eval-set version
(:func:`ragexp.judging.review_status.last_review`), or that review's kappa interval reaches below
``min_kappa`` (``tracking.judge_review.min_kappa``: "reviewed, not good enough", with kappa, interval
and n); the tag ``ragexp.judge_review.status`` says the
same. :func:`log_sweep_summary` returns the unverified metrics (the sweep fails on them under
``tracking.judge_review.unverified=fail``).
"""

from __future__ import annotations

import html
import itertools
import logging
import math
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ragexp.comparison import vs_best
from ragexp.comparison.per_query_diff import format_html, per_query_diff
from ragexp.cost import budgets as cost_budgets
from ragexp.cost.keys import is_cost
from ragexp.evaluation import corrected
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.judging.calibration.record import MIN_KAPPA
from ragexp.judging.review_status import TAG_JUDGE_KEY, ReviewStatus, is_judge_metric, last_review
from ragexp.metrics.measure import ci_bounds, measure
from ragexp.tracking import cost_summary, experiments, store
from ragexp.tracking.heatmap import Panel, anchored_scale, draw_heatmap
from ragexp.tracking.metric_names import HEADLINE, results_view
from ragexp.tracking.run_names import AXIS_TAG_PREFIX

log = logging.getLogger(__name__)
MAX_PANELS = 6
SUMMARY_DIR = "summary"
BEST_TAG_PREFIX = "best."
VS_BEST_TAG_PREFIX = experiments.VS_BEST_TAG_PREFIX
VS_BEST_DIR = "vs_best"
DIFF_K = 5
SORT_METRIC = "hit_rate_at_5"
TAG_BUDGETS = "ragexp.sweep_budgets"
OVER_BUDGET = "over_budget"
#: The parent's tag: ``verified`` or ``unverified: <judge metrics>``.
TAG_REVIEW_STATUS = "ragexp.judge_review.status"
NOT_COMPARABLE_NOTE = ("Gold is whole documents and the runs chunk differently, so these chunk-level metrics do not "
                       "rank them (each chunking has its own number of relevant chunks); compare doc/ metrics")


@dataclass(frozen=True)
class ChildRun:
    run_id: str
    name: str
    axis_values: dict[str, str]
    metrics: dict[str, float]  # headline results keys present on the run
    params: dict[str, str]
    half_widths: dict[str, float] = field(default_factory=dict)  # CI half-width per metric
    costs: dict[str, float] = field(default_factory=dict)  # every cost.* value of the run
    corrected: tuple[str, ...] = ()  # judge metrics whose value is the PPI estimate
    judge_key: str | None = None


@dataclass(frozen=True)
class Ties:
    """The sweep's standings per metric (``{metric: {run id: VsBest}}``) and each metric's noise
    (:func:`ragexp.comparison.vs_best.minimum_detectable_difference` at the best's value)."""

    standings: dict[str, dict[str, vs_best.VsBest]]
    noise: dict[str, float]

    def status(self, metric: str, run_id: str) -> str | None:
        standing = self.standings.get(metric, {}).get(run_id)
        return standing.status if standing else None


def children_of(client: MlflowClient, parent_run_id: str) -> list[Run]:
    """Every run whose parent is ``parent_run_id``, in any experiment (a sweep over eval sets
    logs each job to its own eval set's experiment), oldest first."""
    experiment_ids = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    runs: list[Run] = []
    for start in range(0, len(experiment_ids), 100):
        runs += client.search_runs(experiment_ids[start:start + 100],
                                   filter_string=f"tags.`{store.PARENT_TAG}` = '{parent_run_id}'", max_results=10_000)
    return sorted(runs, key=lambda run: run.info.start_time or 0)


def _child(run: Run, axes: Sequence[str]) -> ChildRun:
    values = results_view(run.data.metrics, run.data.params)
    metrics = {key: values[key] for key in HEADLINE if key in values and not math.isnan(values[key])}
    bounds = {key: ci_bounds(key) for key in HEADLINE}
    half_widths = {key: (values[high] - values[low]) / 2 for key, (low, high) in bounds.items() if low in values and high in values}
    fixed = []
    for key in metrics:
        if is_judge_metric(key) and (found := corrected.from_aggregates(values, key)) is not None:
            metrics[key], half_widths[key] = found[0], (found[2] - found[1]) / 2
            fixed.append(key)
    return ChildRun(
        run_id=run.info.run_id,
        name=run.info.run_name or run.info.run_id[:8],
        axis_values={axis: run.data.tags.get(f"{AXIS_TAG_PREFIX}{axis}", "?") for axis in axes},
        metrics=metrics,
        params=dict(run.data.params),
        half_widths=half_widths,
        costs={key: value for key, value in values.items() if is_cost(key) and not math.isnan(value)},
        corrected=tuple(fixed),
        judge_key=run.data.tags.get(TAG_JUDGE_KEY),
    )


def judge_lines(children: Sequence[ChildRun], metrics: Sequence[str], statuses: Mapping[str, ReviewStatus],
                min_kappa: float) -> tuple[list[str], list[str]]:
    """The description's first lines about the judge metrics among ``metrics``, and the unverified
    ones (module docstring); ``statuses`` maps each child's run id to the review that speaks for it."""
    judged = [m for m in metrics if is_judge_metric(m)]
    if not judged:
        return [], []
    found = [statuses.get(child.run_id) or ReviewStatus(child.judge_key or "", why=" (the run records no judge key)")
             for child in children if any(m in child.metrics for m in judged)]
    unverified = judged if any(not status.verified(min_kappa) for status in found) else []
    lines = []
    if unverified:
        worst = next(status for status in found if not status.verified(min_kappa))
        lines.append(f"**Judge metrics unverified: {', '.join(unverified)}.** {worst.describe(min_kappa)}; "
                     f"floor kappa {min_kappa:g}.")
    else:
        lines.append(f"Judge metrics verified ({', '.join(judged)}): {found[0].describe(min_kappa)}.")
    for metric in judged:
        fixed = [child.name for child in children if metric in child.corrected]
        if fixed:
            lines.append(f"{metric}: PPI estimate (human-corrected) for {', '.join(fixed)}; {corrected.UNCORRECTED} "
                         f"for the other {sum(metric in c.metrics for c in children) - len(fixed)} runs.")
    if not any(child.corrected for child in children):
        lines.append(f"{', '.join(judged)}: {corrected.UNCORRECTED} in every run.")
    return lines, unverified


def _axis_order(children: Sequence[ChildRun], axis: str) -> list[str]:
    """An axis' values in sweep order (the order the jobs ran)."""
    return list(dict.fromkeys(child.axis_values[axis] for child in children))


def best_by_metric(children: Sequence[ChildRun], metrics: Sequence[str]) -> dict[str, ChildRun]:
    """The child with the best value of each metric, the lowest for failure rates (the first such
    child on equal values)."""
    best = {}
    for metric in metrics:
        scored = [child for child in children if metric in child.metrics]
        sign = -1.0 if measure(metric).lower_is_better else 1.0
        if scored:
            best[metric] = max(scored, key=lambda child: sign * child.metrics[metric])
    return best


def heatmap_png(children: Sequence[ChildRun], axes: Sequence[str], metric: str, path: Path,
                ties: Ties | None = None) -> Path:
    """``metric`` over the first axis x the second, one panel per value combination of the other
    axes (see the module docstring); drawn by :func:`~ragexp.tracking.heatmap.draw_heatmap`."""
    ties = ties or Ties({}, {})
    row_axis, col_axis, rest = axes[0], (axes[1] if len(axes) > 1 else None), list(axes[2:])
    rows = _axis_order(children, row_axis)
    cols = _axis_order(children, col_axis) if col_axis else [""]
    facets = list(itertools.product(*(_axis_order(children, axis) for axis in rest))) if rest else [()]
    collapsed = len(facets) > MAX_PANELS
    if collapsed:
        facets = [()]
    values = [child.metrics[metric] for child in children if metric in child.metrics]
    sign = -1.0 if measure(metric).lower_is_better else 1.0  # a cell shows its best run: the lowest failure rate
    panels = []
    for facet in facets:
        cell: list[list[ChildRun | None]] = [[None] * len(cols) for _ in rows]
        for child in children:
            if metric not in child.metrics or any(child.axis_values[a] != v for a, v in zip(rest, facet)):
                continue
            i = rows.index(child.axis_values[row_axis])
            j = cols.index(child.axis_values[col_axis]) if col_axis else 0
            if cell[i][j] is None or sign * child.metrics[metric] > sign * cell[i][j].metrics[metric]:
                cell[i][j] = child
        grid = [[math.nan if c is None else c.metrics[metric] for c in line] for line in cell]
        half = [[math.nan if c is None else c.half_widths.get(metric, math.nan) for c in line] for line in cell]
        tied = [[c is not None and ties.status(metric, c.run_id) == vs_best.TIED for c in line] for line in cell]
        facet_text = "\n".join(f"{a}={v}" for a, v in zip(rest, facet))  # one line per axis: never wider than the panel
        panels.append(Panel(facet_text or ("best over " + ", ".join(rest) if collapsed else ""), grid, half, tied))
    noise = ties.noise.get(metric)
    low, high = anchored_scale(values, noise)
    return draw_heatmap(path, metric, rows, cols, row_axis, col_axis or "", panels, low, high,
                        (max(values) if sign > 0 else min(values)) if values else None, noise=noise)


def _table(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str]):
    ordered = sorted(children, key=lambda c: c.metrics.get(SORT_METRIC, -math.inf), reverse=True)
    winners = best_by_metric(children, metrics)
    best = {m: winners[m].metrics[m] if m in winners else None for m in metrics}
    return ordered, best


def _tie_mark(ties: Ties | None, metric: str, child: ChildRun) -> str:
    return f" {vs_best.TIE_MARK}" if ties is not None and ties.status(metric, child.run_id) == vs_best.TIED else ""


def compare_markdown(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str], experiment_id: str,
                     ties: Ties | None = None, max_chars: int | None = None) -> str:
    """Runs x axis values x headline metrics as a markdown table, best values in bold, values tied
    with the best marked ``≈``, in the order of :func:`_table` (best first). With ``max_chars``,
    the rows that would make the table longer are left out and a last line counts them and names
    ``summary/compare.md``, which holds them all."""
    ordered, best = _table(children, axes, metrics)
    lines = ["| run | " + " | ".join([*axes, *metrics]) + " |", "|---" * (1 + len(axes) + len(metrics)) + "|"]
    rows = []
    for child in ordered:
        cells = [f"[{child.name}]({experiments.run_link(experiment_id, child.run_id)})",
                 *(child.axis_values[a] for a in axes)]
        for metric in metrics:
            value = child.metrics.get(metric)
            cells.append("–" if value is None else (f"**{value:.4f}**" if value == best[metric]
                                                     else f"{value:.4f}{_tie_mark(ties, metric, child)}"))
        rows.append("| " + " | ".join(cells) + " |")
    if max_chars is None:
        return "\n".join(lines + rows) + "\n"
    used = sum(len(line) + 1 for line in lines) + len(_rows_left_out(len(rows))) + 1
    for row in rows:
        if used + len(row) + 1 > max_chars:
            break
        lines.append(row)
        used += len(row) + 1
    left_out = len(rows) - (len(lines) - 2)
    return "\n".join(lines) + "\n" + (_rows_left_out(left_out) + "\n" if left_out else "")


def _rows_left_out(count: int) -> str:
    return f"\n… {count} more runs (below these) in `{SUMMARY_DIR}/compare.md` (the run description's length is limited)."


def compare_html(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str], ties: Ties | None = None) -> str:
    ordered, best = _table(children, axes, metrics)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["run", *axes, *metrics])
    body = []
    for child in ordered:
        cells = [html.escape(child.name), *(html.escape(child.axis_values[a]) for a in axes)]
        for metric in metrics:
            value = child.metrics.get(metric)
            cells.append("–" if value is None else (f"<b>{value:.4f}</b>" if value == best[metric]
                                                     else f"{value:.4f}{_tie_mark(ties, metric, child)}"))
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<!doctype html><meta charset='utf-8'><style>td,th{padding:2px 8px;font:13px sans-serif;text-align:right}"
            "td:first-child,th:first-child{text-align:left}</style>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>\n")


def artifact_url(run_id: str, path: str) -> str:
    """The MLflow server route that serves one artifact file (relative, for markdown images)."""
    return f"get-artifact?{urllib.parse.urlencode({'path': path, 'run_uuid': run_id})}"


def describe(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str], best: Mapping[str, ChildRun],
             parent_run_id: str, experiment_id: str, image: str | None, not_comparable: set[str] = frozenset(),
             ties: Ties | None = None, cost: cost_summary.CostSummary | None = None,
             judge: Sequence[str] = (), reused: Sequence[str] = ()) -> str:
    ties = ties or Ties({}, {})
    sweep = " × ".join(axes) or "no swept axis"
    names = {child.run_id: child.name for child in children}
    lines = [*judge, *([""] if judge else []), f"**Best of {len(children)} runs** (sweep over {sweep}):", ""]
    if reused:
        links = ", ".join(f"[{names[run_id]}]({experiments.run_link(experiment_id, run_id)})" for run_id in reused)
        lines = [*lines, f"{len(reused)} of them logged by an earlier launch of this sweep and reused by this one "
                         f"(resume=true): {links}.", ""]
    if not_comparable:
        lines = [*lines, f"{NOT_COMPARABLE_NOTE}: {', '.join(sorted(not_comparable))}.", ""]
    for metric in metrics:
        if metric in best:
            winner = best[metric]
            half = winner.half_widths.get(metric)
            line = (f"- {metric} **{winner.metrics[metric]:.4f}**" + (f" ± {half:.3f}" if half is not None else "")
                    + f": [{winner.name}]({experiments.run_link(experiment_id, winner.run_id)})")
            if metric in ties.standings:
                noise = ("at its ceiling: noise uninformative" if vs_best.at_ceiling(winner.metrics[metric])
                         else f"noise ±{ties.noise[metric]:.3f}")
                line += f". {vs_best.describe_ties(metric, ties.standings[metric], names)} ({noise})"
            lines.append(line)
    if ties.standings:
        metric = SORT_METRIC if SORT_METRIC in ties.standings else next(iter(ties.standings))
        standing = ties.standings[metric]
        top = next(s for s in standing.values() if s.status == vs_best.BEST)
        lines += ["", f"Tied ({vs_best.TIE_MARK}, dashed in the heatmaps): no paired sign-flip test against the best "
                      f"rejects at 0.05 after Bonferroni over the {len(standing) - 1} comparisons; tag "
                      f"`{VS_BEST_TAG_PREFIX}<metric>` on each run. Noise: "
                      f"{vs_best.noise_line(top.n, top.mean, metric)}. Each run's `{VS_BEST_DIR}/per_query.html` "
                      "lists the queries it wins and loses against the best on hit rate@5."]
    if cost is not None and cost.lines:
        lines += ["", *cost.lines]
        if cost.image:
            lines += ["", f"![quality against p95 latency, Pareto front]({artifact_url(parent_run_id, cost.image)})"]
    if image:
        lines += ["", f"![{SORT_METRIC} by {sweep}]({artifact_url(parent_run_id, image)})"]
    footer = (f"Artifacts: `{SUMMARY_DIR}/` (heatmap per headline metric, compare.md, compare.html"
              + (", quality_vs_latency.png, cost.md" if cost is not None and cost.image else "") + ").")
    head = "\n".join([*lines, ""]) + "\n"
    table = compare_markdown(children, axes, metrics, experiment_id, ties,
                             max_chars=store.DESCRIPTION_LIMIT - len(head) - len(footer) - 1)
    return head + table + "\n" + footer


def _load_results(client: MlflowClient, run_id: str, folder: Path) -> RunResults | None:
    """A child's ``ragexp_results.json``, or ``None`` (reported) when it cannot be read."""
    try:
        return RunResults.load(store.download_artifact(run_id, ARTIFACT_NAME, client.tracking_uri, dst_dir=folder))
    except Exception as err:  # noqa: BLE001 - the summary goes on without this run's per-query values
        log.warning("sweep summary: could not read the results of run %s (%s); it is left out of the tie tests",
                    run_id, str(err).splitlines()[0][:200] if str(err) else type(err).__name__)
        return None


def compute_ties(children: Sequence[ChildRun], metrics: Sequence[str], results: Mapping[str, RunResults]) -> Ties:
    """Standings (:func:`ragexp.comparison.vs_best.classify`) of every metric with per-query values
    in at least two runs, and each metric's noise at the best run's value and ``n``."""
    standings, noise = {}, {}
    for metric in metrics:
        per_query = {}
        for child in children:
            if child.run_id in results:
                values = results[child.run_id].metric_values(metric)
                if values:
                    per_query[child.run_id] = values
        standing = vs_best.classify(per_query, lower_is_better=measure(metric).lower_is_better) if len(per_query) > 1 else {}
        if standing:
            standings[metric] = standing
            top = next(s for s in standing.values() if s.status == vs_best.BEST)
            noise[metric] = vs_best.minimum_detectable_difference(top.n, top.mean)
    return Ties(standings, noise)


def decision(status: str, child: ChildRun, metric: str) -> str:
    """``best · 0.855 ± 0.057``: a child's standing, value and CI half-width on ``metric``, rounded
    to what the eval set can tell (the view's first column, :data:`experiments.DECISION_TAG`)."""
    half = child.half_widths.get(metric)
    return f"{status} · {child.metrics[metric]:.3f}" + (f" ± {half:.3f}" if half is not None and not math.isnan(half) else "")


def log_vs_best(client: MlflowClient, children: Sequence[ChildRun], ties: Ties, results: Mapping[str, RunResults]) -> None:
    """Tag every child with its standing per metric; log each child's per-query diff against the
    best on :data:`SORT_METRIC` (``vs_best/per_query.html`` and ``.json``)."""
    leader = next((run_id for run_id, s in ties.standings.get(SORT_METRIC, {}).items() if s.status == vs_best.BEST), None)
    names = {child.run_id: child.name for child in children}
    sort_standing = ties.standings.get(SORT_METRIC, {})
    for child in children:
        tags = {f"{VS_BEST_TAG_PREFIX}{metric}": standing[child.run_id].status
                for metric, standing in ties.standings.items() if child.run_id in standing}
        if child.run_id in sort_standing and SORT_METRIC in child.metrics:
            tags[experiments.DECISION_TAG] = decision(sort_standing[child.run_id].status, child, SORT_METRIC)
        if tags:
            store.log_batched(client, child.run_id, tags=tags)
        if leader is None or child.run_id == leader or child.run_id not in results:
            continue
        diff = per_query_diff(results[leader], results[child.run_id], DIFF_K,
                              a_label=f"best: {names[leader]} ({leader[:8]})", b_label=f"{child.name} ({child.run_id[:8]})")
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "per_query.html").write_text(format_html(diff), encoding="utf-8")
            (Path(tmp) / "per_query.json").write_text(diff.to_json(), encoding="utf-8")
            store.run_artifacts(client, child.run_id).log_artifacts(tmp, artifact_path=VS_BEST_DIR)


def winners(children: Sequence[ChildRun], ties: Ties) -> list[ChildRun]:
    """The runs best or tied on :data:`SORT_METRIC` (the metric the ragexp view sorts by; the first
    metric with standings when the sweep has none on it), in the children's order."""
    metric = SORT_METRIC if SORT_METRIC in ties.standings else next(iter(ties.standings), None)
    chosen = {run_id for run_id, s in ties.standings.get(metric, {}).items() if s.status in (vs_best.BEST, vs_best.TIED)}
    return [child for child in children if child.run_id in chosen]


def trace_winners(client: MlflowClient, children: Sequence[ChildRun], ties: Ties, results: Mapping[str, RunResults],
                  cache_dir: str) -> None:
    """Log the traces of :func:`winners` that have none yet (:mod:`~ragexp.tracking.logged_traces`);
    a run that cannot be traced is reported and the sweep goes on."""
    from ragexp.tracking.logged_traces import has_traces, prepared_cache, trace_logged_run

    prepare = prepared_cache(cache_dir)
    chosen = [child for child in winners(children, ties) if child.run_id in results and not has_traces(client, child.run_id)]
    for child in chosen:
        try:
            trace_logged_run(client, child.run_id, cache_dir, results=results[child.run_id], prepare=prepare)
        except Exception as err:  # noqa: BLE001 - the run and the summary stand without its traces
            log.warning("could not log the traces of run %s (%s): %s", child.run_id, child.name,
                        str(err).splitlines()[0][:200] if str(err) else type(err).__name__)
    if chosen:
        log.info("traces logged for the %d runs best or tied on %s", len(chosen), SORT_METRIC)


def _axis_params(children: Sequence[ChildRun], axes: Sequence[str]) -> list[str]:
    """The param behind each axis, for the parallel-coordinates chart (a group axis ``a/b`` is
    the param ``a.b.name``)."""
    params = set().union(*(child.params for child in children)) if children else set()
    found = []
    for axis in axes:
        dotted = axis.replace("/", ".")
        found += [key for key in (dotted, f"{dotted}.name") if key in params][:1]
    return found


def log_sweep_summary(client: MlflowClient, parent_run_id: str, experiment_id: str, runs: Sequence[Run],
                      axes: Sequence[str], budgets: Sequence[str] = (), min_kappa: float = MIN_KAPPA,
                      trace_cache_dir: str | None = None, reused: Sequence[str] = ()) -> list[str]:
    """Write the summary of the FINISHED job runs ``runs`` to the parent run (module docstring);
    ``reused``: those of them logged by earlier launches of the sweep (named in the description);
    ``budgets``: the sweep's ``cost.budgets`` strings; with ``trace_cache_dir``
    (``tracking.traces=best``), log the traces of the runs best or tied on hit rate@5
    (:func:`trace_winners`). Returns the unverified judge metrics."""
    children = [_child(run, axes) for run in runs
                if run.info.status == "FINISHED" and run.data.tags.get(store.TAG_KIND) == "job"]
    if not children:
        return []
    metrics = [m for m in HEADLINE if any(m in child.metrics for child in children)]
    limits = [cost_budgets.parse_budget(text) for text in budgets]
    verdicts = {child.run_id: [cost_budgets.check(b, {**child.metrics, **child.costs}) for b in limits] for child in children}
    over = {run for run, found in verdicts.items() if any(v.status == cost_budgets.OVER for v in found)}
    eligible = [child for child in children if child.run_id not in over]
    statuses = {child.run_id: last_review(client, child.judge_key, child.run_id, store.TAG_EVALSET_FP)
                for child in children if child.judge_key}
    judge, unverified = judge_lines(children, metrics, statuses, min_kappa)
    best = best_by_metric(eligible, metrics)
    finished = [run for run in runs if run.info.run_id in {child.run_id for child in children}]
    not_comparable = experiments.not_comparable_across_chunkings(finished, metrics)
    image = None
    with tempfile.TemporaryDirectory() as tmp:
        loaded = {child.run_id: _load_results(client, child.run_id, Path(tmp) / child.run_id) for child in eligible}
        results = {run_id: r for run_id, r in loaded.items() if r is not None}
        ties = compute_ties(eligible, [m for m in metrics if m not in not_comparable], results)
        log_vs_best(client, eligible, ties, results)
        for child in children:
            if child.run_id in over:
                tags = {f"{VS_BEST_TAG_PREFIX}{m}": OVER_BUDGET for m in metrics}
                if SORT_METRIC in child.metrics:
                    tags[experiments.DECISION_TAG] = decision("over budget", child, SORT_METRIC)
                store.log_batched(client, child.run_id, tags=tags)
        if trace_cache_dir is not None:
            trace_winners(client, eligible, ties, results, trace_cache_dir)
        del results, loaded
        folder = Path(tmp) / SUMMARY_DIR
        folder.mkdir()
        quality = SORT_METRIC if SORT_METRIC in metrics else (metrics[0] if metrics else SORT_METRIC)
        cost = cost_summary.summarize_cost(
            [cost_summary.Config(c.run_id, c.name, {**c.metrics, **c.costs}, c.half_widths.get(quality)) for c in children],
            quality, ties.standings.get(quality, {}), verdicts, limits, experiment_id, folder, SUMMARY_DIR)
        for run_id, tags in cost.child_tags.items():
            store.log_batched(client, run_id, tags=tags)
        if axes:
            for metric in metrics:
                heatmap_png(children, axes, metric, folder / f"heatmap_{metric}.png", ties)
            image = f"{SUMMARY_DIR}/heatmap_{metrics[0]}.png" if metrics else None
        (folder / "compare.md").write_text(compare_markdown(children, axes, metrics, experiment_id, ties), encoding="utf-8")
        (folder / "compare.html").write_text(compare_html(children, axes, metrics, ties), encoding="utf-8")
        store.run_artifacts(client, parent_run_id).log_artifacts(str(folder), artifact_path=SUMMARY_DIR)
    tags = {}
    for metric, run in best.items():
        tied = len(vs_best.tie_set(ties.standings.get(metric, {}))) - 1
        tags[f"{BEST_TAG_PREFIX}{metric}"] = (f"{run.name} = {run.metrics[metric]:.4f} (run {run.run_id[:8]})"
                                               + (f", tied: {tied} more" if tied > 0 else "")
                                               + (" (not comparable across chunkings)" if metric in not_comparable else ""))
    tags.update(cost.parent_tags)
    if SORT_METRIC in ties.standings:
        tied = len(vs_best.tie_set(ties.standings[SORT_METRIC]))
        tags[experiments.DECISION_TAG] = f"sweep · {tied}/{len(children)} best or tied · heatmaps"
    tags[store.DESCRIPTION_TAG] = describe(children, axes, metrics, best, parent_run_id, experiment_id, image,
                                           not_comparable, ties, cost, judge,
                                           reused=[c.run_id for c in children if c.run_id in set(reused)])
    if judge:
        tags[TAG_REVIEW_STATUS] = (f"unverified: {', '.join(unverified)}" if unverified else "verified")
    store.log_batched(client, parent_run_id, tags=tags)
    view_metrics = [m for m in (*experiments.RETRIEVAL_HEADLINE, *experiments.GENERATION_HEADLINE) if m in metrics]
    experiments.set_view(client, experiment_id, experiments.view_state(
        axes, _axis_params(children, axes), view_metrics, tie_metrics=[m for m in view_metrics if m in ties.standings]))
    return unverified
