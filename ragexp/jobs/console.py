"""A finished run's terminal summary: its headline metrics, its judge, and every warning it recorded."""

from __future__ import annotations

from ragexp.comparison.table import format_table, headline_metrics
from ragexp.evaluation.corrected import UNCORRECTED


def print_run_summary(output, run_id: str, tracking_uri: str) -> None:
    agg = output.results.aggregates
    metrics = headline_metrics(output.results.meta["ks"], agg)
    print(f"\n{output.run_name}  (run {run_id}: {output.results.meta['n_queries']} queries, "
          f"{int(agg.get('n_queries_no_gold', 0))} without gold evidence and left out of retrieval means)")
    print(format_table(["this run"], {"this run": agg}, metrics))
    system = output.results.meta.get("system")
    if system is not None:
        print(system_line(system, agg))
    judge = output.results.meta.get("judge")
    if judge is not None:
        print(judge_line(judge))
        print(f"judge metrics: {UNCORRECTED} (no person has checked this run's verdicts); "
              f"ragexp judge review {run_id} checks 20 and corrects faithfulness (docs/ppi.md)")
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
            "evidence in them stays gold, which no run can retrieve: a query whose gold lies only there scores 0 "
            "(the run's warnings name those queries)"]


def system_line(system: dict, agg: dict) -> str:
    """How much of a black-box system's output was placed in the corpus, and its endpoint latency."""
    n = int(agg.get("black_box.n_passages", 0))
    located = agg.get("black_box.located_rate", float("nan"))
    line = (f"system: {system['kind']} {system['label']}: {n} passages, {located:.1%} placed in the corpus "
            f"(exact {agg.get('black_box.located_exact_rate', 0):.1%}, normalised {agg.get('black_box.located_normalised_rate', 0):.1%}, "
            f"fuzzy {agg.get('black_box.located_fuzzy_rate', 0):.1%}; {int(agg.get('black_box.n_ambiguous', 0))} ambiguous, "
            f"{int(agg.get('black_box.n_unlocated', 0))} not found); {system.get('responses_from_cache', 0)} responses from the cache")
    if "cost.endpoint_latency_p50_ms" in agg:
        line += (f"; endpoint latency p50 {agg['cost.endpoint_latency_p50_ms']:.0f} ms, "
                 f"p95 {agg['cost.endpoint_latency_p95_ms']:.0f} ms")
    return line


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
        first = next((r.generation_error for r in rows if r.generation_error), "")
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
