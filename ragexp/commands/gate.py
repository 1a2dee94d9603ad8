"""``ragexp gate``: fail CI when a candidate run is worse than its baseline beyond eval-set noise.

``--baseline`` / ``--candidate`` take a results JSON file (``ragexp_results.json``) or an MLflow
run id whose results artifact is downloaded. ``--budget 'cost/latency_p95_ms <= 250'`` (repeatable)
adds a limit the candidate must keep. Exit codes: 0 pass, 1 regression (a metric, a cost, or a
budget broken), 2 usage or data error (bad reference, different eval sets without ``--force``,
too few paired queries, a budget on a metric the candidate did not measure).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from ragexp.commands._runs import add_tracking_argument, load_results
from ragexp.comparison.cost_gate import CostVerdict
from ragexp.comparison.gate import (
    REGRESSION,
    GateReport,
    GateSpec,
    MetricVerdict,
    QueryRegression,
    run_gate,
)
from ragexp.cost.budgets import OVER


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", required=True, metavar="REF", help="results JSON file or MLflow run id")
    parser.add_argument("--candidate", required=True, metavar="REF", help="results JSON file or MLflow run id")
    parser.add_argument("--spec", metavar="FILE", help="gate spec YAML (default: ragexp/resources/gate_default.yaml)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument("--force", action="store_true", help="compare even if the eval set fingerprints differ")
    parser.add_argument("--metrics", metavar="M1,M2", help="gate only these metrics (comma-separated)")
    parser.add_argument("--budget", action="append", default=[], metavar="'METRIC <= X'",
                        help="a limit the candidate must keep, e.g. 'cost/latency_p95_ms <= 250' (repeatable; docs/cost.md)")
    add_tracking_argument(parser)


def run(args: argparse.Namespace) -> int:
    spec = GateSpec.load(args.spec)
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()] if args.metrics else None
    report = run_gate(
        load_results(args.baseline, args.tracking_uri),
        load_results(args.candidate, args.tracking_uri),
        spec,
        metrics=metrics,
        force=args.force,
        baseline_label=args.baseline,
        candidate_label=args.candidate,
        budgets=args.budget,
    )
    render = {"text": render_text, "json": render_json, "markdown": render_markdown}[args.format]
    print(render(report))
    if report.exit_code == 2:
        print("ragexp gate: error: too few paired queries to decide (see notes)", file=sys.stderr)
    return report.exit_code


def _number(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4f}"


def _p_value(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value >= 0.001 else f"{value:.1e}")


def _ci(verdict: MetricVerdict) -> str:
    return "–" if verdict.ci_low is None else f"[{verdict.ci_low:+.4f}, {verdict.ci_high:+.4f}]"


def _tolerance(verdict: MetricVerdict) -> str:
    return f"{_number(verdict.tolerance)} {verdict.tolerance_rule}"


def _rank(rank: int | None) -> str:
    return "–" if rank is None else str(rank)


METRIC_COLUMNS = ("metric", "baseline", "candidate", "delta", "tolerance", "CI of delta", "p", "p Holm", "n", "worse/better",
                  "verdict")


def _metric_cells(verdict: MetricVerdict) -> list[str]:
    arrow = "↑" if verdict.direction == "higher" else "↓"
    return [
        f"{verdict.metric} {arrow}", _number(verdict.baseline), _number(verdict.candidate), _signed(verdict.delta),
        _tolerance(verdict), _ci(verdict), _p_value(verdict.p_value), _p_value(verdict.p_holm), str(verdict.n),
        f"{verdict.worse_queries}/{verdict.better_queries}", verdict.verdict.upper(),
    ]


QUERY_COLUMNS = ("query_id", "tags", "gold lost", "first relevant rank", "metric drops")


def _gold_lost_label(gold_ks: tuple[int, int]) -> str:
    base_k, cand_k = gold_ks
    return f"yes @{base_k}" if base_k == cand_k else f"yes @{base_k}->{cand_k}"


def _query_cells(regression: QueryRegression, gold_ks: tuple[int, int]) -> list[str]:
    drops = ", ".join(f"{metric} -{amount:.2f}" for metric, amount in sorted(regression.drops.items(), key=lambda kv: -kv[1]))
    return [
        regression.query_id, ",".join(regression.tags) or "–", _gold_lost_label(gold_ks) if regression.gold_lost else "",
        f"{_rank(regression.baseline_rank)} -> {_rank(regression.candidate_rank)}" if regression.rank_dropped
        else f"{_rank(regression.baseline_rank)} (same)" if regression.gold_lost else "",
        drops,
    ]


COST_COLUMNS = ("cost", "baseline", "candidate", "worse by", "tolerance", "verdict")


def _cost_cells(verdict: CostVerdict) -> list[str]:
    return [f"{verdict.metric} ↓" if not verdict.metric.endswith("_qps") else f"{verdict.metric} ↑",
            f"{verdict.baseline:.6g}", f"{verdict.candidate:.6g}", f"{verdict.worse:+.6g}",
            f"{verdict.tolerance:.6g} ({verdict.tolerance_rule})", verdict.verdict.upper()]


def _budget_lines(report: GateReport) -> list[str]:
    return [f"budget {verdict.describe()}" for verdict in report.budgets]


def _headline(report: GateReport) -> str:
    regressed = [m.metric for m in report.metrics if m.verdict == REGRESSION]
    regressed += [c.metric for c in report.costs if c.verdict == REGRESSION]
    regressed += [f"{b.budget.metric} over budget" for b in report.budgets if b.status == OVER]
    detail = f" ({', '.join(regressed)})" if regressed else ""
    return f"ragexp gate: {report.status.upper()}{detail}"


def _pairing(report: GateReport) -> str:
    return (
        f"{report.n_paired} paired queries (only in baseline: {report.baseline_only}, "
        f"only in candidate: {report.candidate_only})"
    )


def _aligned(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    numeric = [i for i, name in enumerate(header) if name in {"baseline", "candidate", "delta", "p", "n"}]
    lines = []
    for cells in [list(header), *rows]:
        padded = [cell.rjust(w) if i in numeric else cell.ljust(w) for i, (cell, w) in enumerate(zip(cells, widths))]
        lines.append("  ".join(padded).rstrip())
    return lines


def render_text(report: GateReport) -> str:
    lines = [
        _headline(report),
        f"baseline:  {report.baseline_label}  (eval set {report.baseline_fingerprint or 'unknown'})",
        f"candidate: {report.candidate_label}  (eval set {report.candidate_fingerprint or 'unknown'})",
        _pairing(report),
        "",
        *_aligned(METRIC_COLUMNS, [_metric_cells(v) for v in report.metrics]),
    ]
    if report.costs:
        lines += ["", *_aligned(COST_COLUMNS, [_cost_cells(c) for c in report.costs])]
    if report.budgets:
        lines += ["", *_budget_lines(report)]
    if report.notes:
        lines += ["", "notes:", *(f"  - {note}" for note in report.notes)]
    shown = report.regressions[: report.show_top]
    if shown:
        lines += ["", f"queries that got worse ({len(shown)} of {len(report.regressions)}, worst first):"]
        lines += _aligned(QUERY_COLUMNS, [_query_cells(r, report.gold_ks) for r in shown])
    return "\n".join(lines)


def _markdown_table(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows),
    ]


def render_markdown(report: GateReport) -> str:
    icon = {"pass": "✅", "regression": "❌", "insufficient": "⚠️"}[report.status]
    lines = [
        f"### {icon} {_headline(report)}",
        "",
        f"Baseline `{report.baseline_label}` vs candidate `{report.candidate_label}`: {_pairing(report)}.",
        "",
        *_markdown_table(METRIC_COLUMNS, [_metric_cells(v) for v in report.metrics]),
    ]
    if report.costs:
        lines += ["", *_markdown_table(COST_COLUMNS, [_cost_cells(c) for c in report.costs])]
    if report.budgets:
        lines += ["", *(f"- {line}" for line in _budget_lines(report))]
    if report.notes:
        lines += ["", *(f"- {note}" for note in report.notes)]
    shown = report.regressions[: report.show_top]
    if shown:
        lines += [
            "", "<details><summary>"
            f"Queries that got worse ({len(shown)} of {len(report.regressions)}, worst first)</summary>", "",
            *_markdown_table(QUERY_COLUMNS, [_query_cells(r, report.gold_ks) for r in shown]),
            "", "</details>",
        ]
    return "\n".join(lines)


def report_to_dict(report: GateReport) -> dict:
    """The whole report as JSON-ready data; ``regressions`` lists every query that got worse."""
    data = asdict(report)
    for row, verdict in zip(data["budgets"], report.budgets):
        row["near"] = verdict.near
    data["status"] = report.status
    data["exit_code"] = report.exit_code
    for row, regression in zip(data["regressions"], report.regressions):
        row["rank_dropped"] = regression.rank_dropped
        row["severity"] = regression.severity
    return data


def render_json(report: GateReport) -> str:
    return json.dumps(report_to_dict(report), indent=2, ensure_ascii=False)
