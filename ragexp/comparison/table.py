"""Side-by-side metric tables in the terminal: runs as rows, metrics as columns, best per column marked."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ragexp.metrics.measure import measure

HEADLINE = ("hit_rate_at_{k}", "recall_at_{k}", "context_precision_at_{k}", "ndcg_at_{k}")


def format_table(names: Sequence[str], rows: Mapping[str, Mapping[str, float | None]], metrics: Sequence[str],
                 unranked: Collection[str] = (), flag: str = "", tied: Mapping[str, Collection[str]] = {}) -> str:
    """Runs as rows, metrics as columns; the best value per column marked with ``*``, except in
    the ``unranked`` columns (values not comparable across these runs), whose header gets ``flag``;
    ``tied[metric]`` names the runs indistinguishable from the best, marked ``≈``."""
    best: dict[str, float] = {}
    for metric in metrics:
        values = [rows[n].get(metric) for n in names if rows[n].get(metric) is not None]
        if values and len(names) > 1 and metric not in unranked:
            best[metric] = min(values) if measure(metric).lower_is_better else max(values)
    header = ["run", *(f"{m}{flag}" if m in unranked else m for m in metrics)]
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
