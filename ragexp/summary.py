"""Terminal output: a run's headline metrics and a side-by-side table of several runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

HEADLINE = ("hit_rate_at_{k}", "recall_at_{k}", "context_precision_at_{k}", "ndcg_at_{k}")
LOWER_IS_BETTER_PREFIXES = ("time.", "judge_failures", "retrieval_failure", "generation_failure", "generation_error", "hallucinated",
                            "generation_errors", "n_retrieval_failure", "n_generation_failure", "n_hallucinated")


def lower_is_better(metric: str) -> bool:
    return metric.startswith(LOWER_IS_BETTER_PREFIXES)


def format_table(names: Sequence[str], rows: Mapping[str, Mapping[str, float | None]], metrics: Sequence[str]) -> str:
    """Runs as rows, metrics as columns; the best value per column marked with ``*``."""
    best: dict[str, float] = {}
    for metric in metrics:
        values = [rows[n].get(metric) for n in names if rows[n].get(metric) is not None]
        if values and len(names) > 1:
            best[metric] = min(values) if lower_is_better(metric) else max(values)
    header = ["run", *metrics]
    body = []
    for name in names:
        cells = [name]
        for metric in metrics:
            value = rows[name].get(metric)
            if value is None:
                cells.append("-")
            else:
                mark = "*" if metric in best and value == best[metric] else " "
                cells.append(f"{value:.4f}{mark}")
        body.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def headline_metrics(ks: Sequence[int], available: Mapping[str, float]) -> list[str]:
    k = 5 if 5 in ks else max(ks)
    names = [p.format(k=k) for p in HEADLINE] + ["mrr"]
    names += [m for m in ("faithfulness", "answer_relevance", "f1", "retrieval_failure_rate", "generation_failure_rate")
              if m in available]
    return [n for n in names if n in available]


def print_run_summary(output, run_id: str, tracking_uri: str) -> None:
    agg = output.results.aggregates
    metrics = headline_metrics(output.results.meta["ks"], agg)
    print(f"\n{output.run_name}  (run {run_id}: {output.results.meta['n_queries']} queries, "
          f"{int(agg.get('n_queries_no_gold', 0))} without gold evidence and left out of retrieval means)")
    print(format_table(["this run"], {"this run": agg}, metrics))
    judge = output.results.meta.get("judge")
    if judge is not None:
        print(judge_line(judge))
    for warning in [*index_warnings(output.results), *call_failure_warnings(output.results), *run_warnings(output.results)]:
        print(warning)
    print(f"logged to {tracking_uri}; open it with: ragexp ui")


def index_warnings(results) -> list[str]:
    """A loud line for documents no chunk was made of (neither text nor title)."""
    missing = int(results.aggregates.get("n_docs_not_indexed", 0))
    if not missing:
        return []
    shown = ", ".join(results.meta.get("docs_not_indexed", [])[:5])
    return [f"WARNING: {missing} documents have neither text nor title and were not indexed ({shown}); "
            "evidence in them counts at neither chunk nor document level"]


def judge_line(record: dict) -> str:
    """Which judge scored faithfulness and how far to trust it: the calibration's numbers, and
    the run's judge warning (the ``ragexp.judge_warning`` tag) when there is one."""
    calibration = record["calibration"]
    threshold = "" if record["threshold"] is None else f", threshold {record['threshold']:.4g} ({record['threshold_source']})"
    kind = record["identity"].get("kind", "?")
    if calibration is None:
        line = f"judge: {kind}{threshold}, no calibration"
    else:
        kappa = "undefined" if calibration["kappa"] is None else f"{calibration['kappa']:.3f}"
        line = (f"judge: {kind}{threshold}, calibrated on {calibration['set']!r} (n={calibration['n']}, "
                f"{calibration['estimate']}: accuracy {calibration['accuracy']:.3f}, kappa {kappa})")
    return line + (f"\nWARNING: {record['warning']}" if record["warning"] else "")


def call_failure_warnings(results) -> list[str]:
    """Loud lines for failed generator calls and judge verdicts (counted, never scored as 0 or 1)."""
    agg, rows = results.aggregates, results.per_query
    lines = []
    errors = int(agg.get("generation_errors", 0))
    if errors:
        first = next((r["generation_error"] for r in rows if r.get("generation_error")), "")
        lines.append(f"WARNING: {errors} of {len(rows)} generator calls failed (first: {first[:200]}); "
                     "their answers are empty and they are left out of faithfulness and answer relevance")
    failures = int(agg.get("judge_failures", 0))
    if failures:
        lines.append(f"WARNING: {failures} claim verdicts failed (no yes/no, timeout or HTTP error); "
                     "they are counted in judge_failures and left out of faithfulness")
    return lines


def run_warnings(results) -> list[str]:
    """The warnings a run recorded (``meta.warnings``, e.g. a BM25 index where no term scores)."""
    return [f"WARNING: {warning}" for warning in results.meta.get("warnings", [])]
