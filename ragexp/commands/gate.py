"""``ragexp gate``: fail CI when a candidate run is worse than its baseline beyond eval-set noise.

``--baseline`` / ``--candidate`` take a results JSON file (``ragexp_results.json``) or an MLflow
run id whose results artifact is downloaded. ``--budget 'cost/latency_p95_ms <= 250'`` (repeatable)
adds a limit the candidate must keep. Exit codes: 0 pass, 1 regression (a metric, a cost, or a
budget broken; or an unverified judge metric under ``--unverified fail``), 2 usage or data error
(bad reference, different eval sets without ``--force``, runs on different corpora whose gold held
bare offsets nobody could verify without ``--force`` (docs/living-evalset.md), too few paired
queries, a budget on a metric the candidate did not measure).

Judge metrics: each run's human labels (the run's ``judge_review/labels.csv`` artifact for a run
id, and the rows of ``--labels FILE`` that label its claims) give its PPI estimates
(:mod:`ragexp.evaluation.corrected`), which the gate compares where both runs have them; each run's
judge key (``meta.judge``) finds the judge's last human review in the tracking store
(:func:`ragexp.judging.review_status.last_review`). The second line of the report names the
judge metrics that are unverified, or says that they are verified.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from ragexp.commands._runs import RUN_ID, add_tracking_argument, load_results, run_or_file_ref
from ragexp.comparison.cost_gate import CostVerdict
from ragexp.comparison.gate import (
    REGRESSION,
    UNVERIFIED,
    GateReport,
    GateSpec,
    JudgeReviewRule,
    MetricVerdict,
    QueryRegression,
    run_gate,
)
from ragexp.config.machine import default_tracking_uri
from ragexp.cost.budgets import OVER
from ragexp.errors import RagexpInputError
from ragexp.evaluation import corrected
from ragexp.evaluation.results import RunResults
from ragexp.judging.answer_labels import read_answer_labels
from ragexp.judging.calibration.labels import read_labels
from ragexp.judging.calibration.record import judge_key
from ragexp.judging.review_status import FAIL, WARN, ReviewStatus, is_judge_metric, last_review
from ragexp.tracking import store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", required=True, metavar="REF", type=run_or_file_ref,
                        help="results JSON file, or MLflow run id (or a unique prefix of one)")
    parser.add_argument("--candidate", required=True, metavar="REF", type=run_or_file_ref,
                        help="results JSON file, or MLflow run id (or a unique prefix of one)")
    parser.add_argument("--spec", metavar="FILE", help="gate spec YAML (default: ragexp/resources/gate_default.yaml)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument("--force", action="store_true", help="compare even if the eval set fingerprints differ")
    parser.add_argument("--metrics", metavar="M1,M2", help="gate only these metrics (comma-separated)")
    parser.add_argument("--budget", action="append", default=[], metavar="'METRIC <= X'",
                        help="a limit the candidate must keep, e.g. 'cost/latency_p95_ms <= 250' (repeatable; docs/cost.md)")
    parser.add_argument("--labels", type=Path, metavar="FILE",
                        help="human labels CSV (ragexp judge review/sample format): judge metrics of a run it labels are "
                             "compared on their PPI estimates")
    parser.add_argument("--answer-labels", type=Path, metavar="FILE",
                        help="a person's failure class of whole answers (ragexp judge sample --answers): "
                             "generation_failure_rate and ok_rate of a run it labels are compared on their PPI estimates")
    parser.add_argument("--min-kappa", type=float, metavar="K",
                        help="a judge metric is verified when its judge's last review has kappa >= K (default: the spec's, 0.4)")
    parser.add_argument("--unverified", choices=(WARN, FAIL),
                        help="what an unverified judge metric does: warn (default) or fail (exit code 1)")
    add_tracking_argument(parser)


def run(args: argparse.Namespace) -> int:
    spec = GateSpec.load(args.spec)
    if args.min_kappa is not None and not -1 <= args.min_kappa <= 1:
        raise RagexpInputError(f"must be in [-1, 1], got {args.min_kappa}", field="--min-kappa")
    spec = replace(spec, judge_review=JudgeReviewRule(
        spec.judge_review.min_kappa if args.min_kappa is None else args.min_kappa,
        args.unverified or spec.judge_review.unverified))
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()] if args.metrics else None
    rows = read_labels(args.labels) if args.labels else []
    answer_rows = read_answer_labels(args.answer_labels) if args.answer_labels else []
    baseline = load_results(args.baseline, args.tracking_uri)
    candidate = load_results(args.candidate, args.tracking_uri)
    judged = [name for name in (metrics or [rule.metric for rule in spec.rules]) if is_judge_metric(name)]
    reviews = None
    if judged and any(r.meta.get("judge") for r in (baseline, candidate)):
        statuses = [_review_of(ref, r, args) for ref, r in ((args.baseline, baseline), (args.candidate, candidate))]
        floor = spec.judge_review.min_kappa
        named = [(which, s) for which, s in zip(("baseline", "candidate"), statuses) if s is not None]
        which, shown = next(((w, s) for w, s in named if not s.verified(floor)), named[-1])
        reviews = {name: f"{shown.describe(floor)} [the {which}'s judge]" for name in judged}
    report = run_gate(
        baseline,
        candidate,
        spec,
        metrics=metrics,
        force=args.force,
        baseline_label=args.baseline,
        candidate_label=args.candidate,
        budgets=args.budget,
        corrected=(_corrected(args.baseline, baseline, rows, answer_rows, args),
                   _corrected(args.candidate, candidate, rows, answer_rows, args)),
        reviews=reviews,
    )
    render = {"text": render_text, "json": render_json, "markdown": render_markdown}[args.format]
    print(render(report))
    if report.exit_code == 2:
        print("ragexp gate: error: too few paired queries to decide (see notes)", file=sys.stderr)
    return report.exit_code


def _review_of(ref: str, results: RunResults, args: argparse.Namespace) -> ReviewStatus | None:
    """The human review that speaks for the run (of its claims, or of a run sharing its judge,
    generator and eval-set version: :func:`last_review`; ``None`` for a run without a judge); without
    a readable tracking store the judge counts as never reviewed, and the status says where it looked."""
    record = results.meta.get("judge")
    if not isinstance(record, dict):
        return None
    key = judge_key(record)
    uri = args.tracking_uri or default_tracking_uri()
    try:
        client = store.connect(uri, create=False)
    except RagexpInputError:
        return ReviewStatus(key, why=f" (no tracking store at {uri} to look for reviews in)")
    run_id = ref if RUN_ID.fullmatch(ref) and not Path(ref).exists() else results.meta.get("run_id")
    return last_review(client, key, run_id, store.TAG_EVALSET_FP)


def _corrected(ref: str, results: RunResults, rows: list, answer_rows: list, args: argparse.Namespace) -> dict:
    """The run's PPI estimates from ``--labels``, ``--answer-labels`` and, for a run id, the labels
    logged to it (its review's and ``ragexp judge ppi``'s artifacts)."""
    rows, answer_rows = list(rows), list(answer_rows)
    if RUN_ID.fullmatch(ref) and not Path(ref).exists():
        with tempfile.TemporaryDirectory(prefix="ragexp-") as scratch:
            for artifact, reader, into in ((corrected.REVIEW_ARTIFACT, read_labels, rows),
                                           (corrected.LABELS_ARTIFACT, read_labels, rows),
                                           (corrected.ANSWER_LABELS_ARTIFACT, read_answer_labels, answer_rows)):
                try:
                    path = store.download_artifact(ref, artifact, args.tracking_uri or default_tracking_uri(),
                                                   dst_dir=Path(scratch) / artifact.replace("/", "_"))
                except Exception:  # noqa: BLE001 - a run without labels has no such artifact
                    continue
                into += reader(path)
    if not rows and not answer_rows:
        return {}
    run_id = ref if RUN_ID.fullmatch(ref) else results.meta.get("run_id")
    return corrected.corrected(results, corrected.labels_for(results, rows, run_id).labels,
                               answers=corrected.answer_labels_for(results, answer_rows, run_id))


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
                  "verdict", "from")


def _metric_cells(verdict: MetricVerdict) -> list[str]:
    arrow = "↑" if verdict.direction == "higher" else "↓"
    return [
        f"{verdict.metric} {arrow}", _number(verdict.baseline), _number(verdict.candidate), _signed(verdict.delta),
        _tolerance(verdict), _ci(verdict), _p_value(verdict.p_value), _p_value(verdict.p_holm), str(verdict.n),
        f"{verdict.worse_queries}/{verdict.better_queries}", verdict.verdict.upper() + (" UNVERIFIED" if verdict.unverified else ""),
        {"judge": "judge only, uncorrected", "PPI": "PPI (human-corrected)"}.get(verdict.source, ""),
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
    if report.status == UNVERIFIED:
        unverified = next(m for m in report.metrics if m.unverified)
        state = unverified.review.partition("(")[2].partition(")")[0] or "unverified"
        detail = f" (judge metrics unverified, {state}: {', '.join(report.unverified)})"
    return f"ragexp gate: {report.status.upper()}{detail}"


def _judge_line(report: GateReport) -> str | None:
    """The second line: whether the gated judge metrics are verified, and what the review found."""
    judged = [m for m in report.metrics if m.review]
    if not judged:
        return None
    rule = report.judge_review
    found = next((m for m in judged if m.unverified), judged[0]).review
    if report.unverified:
        action = "the gate fails" if rule.unverified == "fail" else "a warning; --unverified fail fails the gate"
        return f"judge metrics UNVERIFIED ({action}): {', '.join(report.unverified)}: {found}"
    return f"judge metrics verified: {', '.join(m.metric for m in judged)}: {found.removeprefix('verified: ')}"


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
        *filter(None, [_judge_line(report)]),
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
    icon = {"pass": "✅", "regression": "❌", "insufficient": "⚠️", "unverified": "❌"}[report.status]
    lines = [
        f"### {icon} {_headline(report)}",
        "",
        *([f"**{line}**", ""] if (line := _judge_line(report)) else []),
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
    data["unverified"] = report.unverified
    for row, regression in zip(data["regressions"], report.regressions):
        row["rank_dropped"] = regression.rank_dropped
        row["severity"] = regression.severity
    return data


def render_json(report: GateReport) -> str:
    return json.dumps(report_to_dict(report), indent=2, ensure_ascii=False)
