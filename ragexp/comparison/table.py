"""Side-by-side metric tables in the terminal: runs as rows, metrics as columns, best per column marked."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from ragexp.cost import keys as cost_keys
from ragexp.metrics.measure import at, measure

#: The retrieval metrics a table leads with, at the headline k (then ``mrr``).
HEADLINE = ("hit_rate", "recall", "context_precision", "ndcg")


#: After a judge metric's value whose judge is unverified (``ragexp compare``).
UNVERIFIED_MARK = "?"


def format_table(names: Sequence[str], rows: Mapping[str, Mapping[str, float | None]], metrics: Sequence[str],
                 unranked: Collection[str] = (), flag: str = "", tied: Mapping[str, Collection[str]] = {},
                 unverified: Mapping[str, Collection[str]] = {}) -> str:
    """Runs as rows, metrics as columns; the best value per column marked with ``*``, except in
    the ``unranked`` columns (values not comparable across these runs), whose header gets ``flag``;
    ``tied[metric]`` names the runs indistinguishable from the best, marked ``≈``;
    ``unverified[metric]`` the runs whose judge metric no good-enough human review backs, marked
    :data:`UNVERIFIED_MARK` after any other mark (a best value among them reads ``*?``). Cost columns
    (:data:`COST_COLUMNS`) read in their unit under a short header (``p95 ms``, ``index MB``)."""
    best: dict[str, float] = {}
    for metric in metrics:
        values = [rows[n].get(metric) for n in names if rows[n].get(metric) is not None]
        if values and len(names) > 1 and metric not in unranked:
            best[metric] = min(values) if measure(metric).lower_is_better else max(values)
    header = ["run", *(f"{m}{flag}" if m in unranked else cost_header(m) for m in metrics)]
    body = []
    for name in names:
        cells = [name]
        for metric in metrics:
            value = rows[name].get(metric)
            if value is None:
                cells.append("-")
            else:
                ranked = metric in best
                mark = "*" if ranked and value == best[metric] else ("≈" if ranked and name in tied.get(metric, ()) else " ")
                doubt = UNVERIFIED_MARK if name in unverified.get(metric, ()) else ""
                cells.append(f"{cost_cell(metric, value)}{mark}{doubt}")
        body.append(cells)
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def headline_metrics(ks: Sequence[int], available: Mapping[str, float]) -> list[str]:
    k = 5 if 5 in ks else max(ks)
    names = [at(name, k) for name in HEADLINE] + ["mrr"]
    names += [m for m in ("faithfulness", "answer_relevance", "f1", "retrieval_failure_rate", "generation_failure_rate")
              if m in available]
    return [n for n in names if n in available]


_MB = 1024 * 1024
#: The cost columns ``ragexp compare`` adds when runs measured them: header and cell format.
COST_COLUMNS: dict[str, tuple[str, Callable[[float], str]]] = {
    cost_keys.INDEX_BYTES: ("index MB", lambda v: f"{v / _MB:.1f}"),
    cost_keys.PEAK_RSS_BYTES: ("peak RSS MB", lambda v: f"{v / _MB:.0f}"),
    cost_keys.GEN_TOKENS_IN: ("gen tok in/q", lambda v: f"{v:.0f}"),
    cost_keys.GEN_TOKENS_OUT: ("gen tok out/q", lambda v: f"{v:.0f}"),
    cost_keys.MONEY_PER_1K: ("money/1k q", lambda v: f"{v:.4f}"),
}


def cost_header(metric: str) -> str:
    """A column's header: a cost in its unit (a p95 latency: ``p95 ms`` or ``endpoint p95 ms``),
    any other metric by its key."""
    if cost_keys.is_latency_p95(metric):
        stem = metric[len(cost_keys.PREFIX):-len("latency_p95_ms")].rstrip("_").replace("_", " ")
        return f"{stem} p95 ms".strip()
    return COST_COLUMNS[metric][0] if metric in COST_COLUMNS else metric


def cost_cell(metric: str, value: float) -> str:
    if cost_keys.is_latency_p95(metric):
        return f"{value:.1f}"
    return COST_COLUMNS[metric][1](value) if metric in COST_COLUMNS else f"{value:.4f}"


def cost_metrics(available: Collection[str]) -> list[str]:
    """The cost columns present among ``available``: every p95 latency (ragexp's served one
    first), then :data:`COST_COLUMNS` in order."""
    latencies = sorted((m for m in available if cost_keys.is_latency_p95(m)), key=lambda m: (m != cost_keys.LATENCY_P95_MS, m))
    return latencies + [m for m in COST_COLUMNS if m in available]
