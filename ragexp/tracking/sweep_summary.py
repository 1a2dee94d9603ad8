"""A sweep's parent run holds the sweep's answer: which variant won on each headline metric.

Written when the sweep ends, from its FINISHED child runs:

- ``summary/heatmap_<metric>.png`` per headline metric: the first sweep axis (rows) against the
  second (columns), one panel per value combination of the other axes (beyond
  :data:`MAX_PANELS` panels a cell shows the best over the other axes, and the title says so);
  one colour scale per metric, every cell annotated, the best cell in bold and outlined;
- ``summary/compare.md`` and ``summary/compare.html``: runs x axis values x headline metrics,
  best hit rate@5 first, the best value of each metric in bold;
- tags ``best.<metric>`` = ``<run name> = <value> (run <id[:8]>)`` per headline metric (marked
  not comparable across chunkings when the gold is whole documents and the runs chunk differently);
- the run's description (``mlflow.note.content``, shown on its overview page): the best run per
  headline metric with a link, the hit rate@5 heatmap, the compare table;
- the experiment's ragexp view (:mod:`~ragexp.tracking.experiments`) gets the sweep's axes as
  columns and parallel-coordinates axes.
"""

from __future__ import annotations

import html
import itertools
import math
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ragexp.tracking import experiments, store
from ragexp.tracking.heatmap import Panel, draw_heatmap
from ragexp.tracking.labels import AXIS_TAG_PREFIX
from ragexp.tracking.metric_names import HEADLINE, results_view

MAX_PANELS = 6
SUMMARY_DIR = "summary"
BEST_TAG_PREFIX = "best."
SORT_METRIC = "hit_rate_at_5"
NOT_COMPARABLE_NOTE = ("Gold is whole documents and the runs chunk differently, so these chunk-level metrics do not "
                       "rank them (each chunking has its own number of relevant chunks); compare doc/ metrics")


@dataclass(frozen=True)
class ChildRun:
    run_id: str
    name: str
    axis_values: dict[str, str]
    metrics: dict[str, float]  # headline results keys present on the run
    params: dict[str, str]


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
    return ChildRun(
        run_id=run.info.run_id,
        name=run.info.run_name or run.info.run_id[:8],
        axis_values={axis: run.data.tags.get(f"{AXIS_TAG_PREFIX}{axis}", "?") for axis in axes},
        metrics={key: values[key] for key in HEADLINE if key in values and not math.isnan(values[key])},
        params=dict(run.data.params),
    )


def _axis_order(children: Sequence[ChildRun], axis: str) -> list[str]:
    """An axis' values in sweep order (the order the jobs ran)."""
    return list(dict.fromkeys(child.axis_values[axis] for child in children))


def best_by_metric(children: Sequence[ChildRun], metrics: Sequence[str]) -> dict[str, ChildRun]:
    """The child with the highest value of each metric (the first such child on ties)."""
    best = {}
    for metric in metrics:
        scored = [child for child in children if metric in child.metrics]
        if scored:
            best[metric] = max(scored, key=lambda child: child.metrics[metric])
    return best


def heatmap_png(children: Sequence[ChildRun], axes: Sequence[str], metric: str, path: Path) -> Path:
    """``metric`` over the first axis x the second, one panel per value combination of the other
    axes (see the module docstring); drawn by :func:`~ragexp.tracking.heatmap.draw_heatmap`."""
    row_axis, col_axis, rest = axes[0], (axes[1] if len(axes) > 1 else None), list(axes[2:])
    rows = _axis_order(children, row_axis)
    cols = _axis_order(children, col_axis) if col_axis else [""]
    facets = list(itertools.product(*(_axis_order(children, axis) for axis in rest))) if rest else [()]
    collapsed = len(facets) > MAX_PANELS
    if collapsed:
        facets = [()]
    values = [child.metrics[metric] for child in children if metric in child.metrics]
    panels = []
    for facet in facets:
        grid = [[math.nan] * len(cols) for _ in rows]
        for child in children:
            if metric not in child.metrics or any(child.axis_values[a] != v for a, v in zip(rest, facet)):
                continue
            i = rows.index(child.axis_values[row_axis])
            j = cols.index(child.axis_values[col_axis]) if col_axis else 0
            grid[i][j] = child.metrics[metric] if math.isnan(grid[i][j]) else max(grid[i][j], child.metrics[metric])
        facet_text = "\n".join(f"{a}={v}" for a, v in zip(rest, facet))  # one line per axis: never wider than the panel
        panels.append(Panel(facet_text or ("best over " + ", ".join(rest) if collapsed else ""), grid))
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    return draw_heatmap(path, metric, rows, cols, row_axis, col_axis or "", panels, low, high,
                        high if values else None)


def _table(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str]):
    ordered = sorted(children, key=lambda c: c.metrics.get(SORT_METRIC, -math.inf), reverse=True)
    best = {m: max((c.metrics[m] for c in children if m in c.metrics), default=None) for m in metrics}
    return ordered, best


def compare_markdown(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str], experiment_id: str) -> str:
    """Runs x axis values x headline metrics as a markdown table, best values in bold."""
    ordered, best = _table(children, axes, metrics)
    lines = ["| run | " + " | ".join([*axes, *metrics]) + " |", "|---" * (1 + len(axes) + len(metrics)) + "|"]
    for child in ordered:
        cells = [f"[{child.name}]({experiments.run_link(experiment_id, child.run_id)})",
                 *(child.axis_values[a] for a in axes)]
        for metric in metrics:
            value = child.metrics.get(metric)
            cells.append("–" if value is None else (f"**{value:.4f}**" if value == best[metric] else f"{value:.4f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def compare_html(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str]) -> str:
    ordered, best = _table(children, axes, metrics)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["run", *axes, *metrics])
    body = []
    for child in ordered:
        cells = [html.escape(child.name), *(html.escape(child.axis_values[a]) for a in axes)]
        for metric in metrics:
            value = child.metrics.get(metric)
            cells.append("–" if value is None else (f"<b>{value:.4f}</b>" if value == best[metric] else f"{value:.4f}"))
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<!doctype html><meta charset='utf-8'><style>td,th{padding:2px 8px;font:13px sans-serif;text-align:right}"
            "td:first-child,th:first-child{text-align:left}</style>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>\n")


def artifact_url(run_id: str, path: str) -> str:
    """The MLflow server route that serves one artifact file (relative, for markdown images)."""
    return f"get-artifact?{urllib.parse.urlencode({'path': path, 'run_uuid': run_id})}"


def describe(children: Sequence[ChildRun], axes: Sequence[str], metrics: Sequence[str], best: Mapping[str, ChildRun],
             parent_run_id: str, experiment_id: str, image: str | None, not_comparable: set[str] = frozenset()) -> str:
    sweep = " × ".join(axes) or "no swept axis"
    lines = [f"**Best of {len(children)} runs** (sweep over {sweep}):", ""]
    if not_comparable:
        lines = [*lines, f"{NOT_COMPARABLE_NOTE}: {', '.join(sorted(not_comparable))}.", ""]
    for metric in metrics:
        if metric in best:
            winner = best[metric]
            tied = sum(child.metrics.get(metric) == winner.metrics[metric] for child in children) - 1
            lines.append(f"- {metric} **{winner.metrics[metric]:.4f}**: "
                         f"[{winner.name}]({experiments.run_link(experiment_id, winner.run_id)})"
                         + (f" (tied with {tied} more)" if tied else ""))
    if image:
        lines += ["", f"![{SORT_METRIC} by {sweep}]({artifact_url(parent_run_id, image)})"]
    lines += ["", compare_markdown(children, axes, metrics, experiment_id),
              f"Artifacts: `{SUMMARY_DIR}/` (heatmap per headline metric, compare.md, compare.html)."]
    return "\n".join(lines)


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
                      axes: Sequence[str]) -> None:
    """Write the summary of the FINISHED job runs ``runs`` to the parent run (module docstring)."""
    children = [_child(run, axes) for run in runs
                if run.info.status == "FINISHED" and run.data.tags.get(store.TAG_KIND) == "job"]
    if not children:
        return
    metrics = [m for m in HEADLINE if any(m in child.metrics for child in children)]
    best = best_by_metric(children, metrics)
    finished = [run for run in runs if run.info.run_id in {child.run_id for child in children}]
    not_comparable = experiments.not_comparable_across_chunkings(finished, metrics)
    image = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / SUMMARY_DIR
        folder.mkdir()
        if axes:
            for metric in metrics:
                heatmap_png(children, axes, metric, folder / f"heatmap_{metric}.png")
            image = f"{SUMMARY_DIR}/heatmap_{metrics[0]}.png" if metrics else None
        (folder / "compare.md").write_text(compare_markdown(children, axes, metrics, experiment_id), encoding="utf-8")
        (folder / "compare.html").write_text(compare_html(children, axes, metrics), encoding="utf-8")
        client.log_artifacts(parent_run_id, str(folder), artifact_path=SUMMARY_DIR)
    tags = {f"{BEST_TAG_PREFIX}{metric}": f"{run.name} = {run.metrics[metric]:.4f} (run {run.run_id[:8]})"
            + (" (not comparable across chunkings)" if metric in not_comparable else "")
            for metric, run in best.items()}
    tags[store.DESCRIPTION_TAG] = describe(children, axes, metrics, best, parent_run_id, experiment_id, image,
                                           not_comparable)
    store.log_batched(client, parent_run_id, tags=tags)
    view_metrics = [m for m in (*experiments.RETRIEVAL_HEADLINE, *experiments.GENERATION_HEADLINE) if m in metrics]
    experiments.set_view(client, experiment_id, experiments.view_state(axes, _axis_params(children, axes), view_metrics))
