"""Where two runs of one eval set differ, query by query.

For runs A and B paired by ``query_id`` (queries both scored) and a cut-off ``k``:

- ``A hits, B misses``: ``hit_rate_at_k`` is 1 in A and 0 in B (a relevant unit in A's top k,
  none in B's); ``B hits, A misses`` the reverse;
- ``rank moved``: both hit or both miss, but the rank of the first relevant unit differs
  (``None``, nothing relevant retrieved, counts as a rank below every other).

Each split lists the query, its tags and each run's failure class (a generation run's own, else
:func:`ragexp.evaluation.results.failure_class`: the retrieval-only class at the run's ``context_k``). Splits come first,
then rank moves, largest move first. Rendered for the terminal, as JSON and as HTML (the
artifact ``per_query_diff/<other run id>.html`` logged to both runs by ``ragexp compare --per-query``).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass

from ragexp.comparison.gate import first_relevant_rank
from ragexp.evaluation.results import RunResults
from ragexp.metrics.measure import at

A_ONLY, B_ONLY, RANK_MOVED = "A hits, B misses", "B hits, A misses", "rank moved"
KINDS = (A_ONLY, B_ONLY, RANK_MOVED)


@dataclass(frozen=True)
class QuerySplit:
    query_id: str
    query: str
    tags: list[str]
    kind: str
    a_rank: int | None
    b_rank: int | None
    a_class: str
    b_class: str


@dataclass(frozen=True)
class PerQueryDiff:
    a_label: str
    b_label: str
    k: int
    n_paired: int
    splits: list[QuerySplit]

    def count(self, kind: str) -> int:
        return sum(split.kind == kind for split in self.splits)

    def to_json(self) -> str:
        return json.dumps({"a": self.a_label, "b": self.b_label, "k": self.k, "n_paired": self.n_paired,
                           "counts": {kind: self.count(kind) for kind in KINDS},
                           "queries": [asdict(split) for split in self.splits]}, indent=1, ensure_ascii=False)


def _move(split: QuerySplit) -> float:
    a, b = split.a_rank, split.b_rank
    return abs((a or float("inf")) - (b or float("inf"))) if a is not None and b is not None else float("inf")


def per_query_diff(a: RunResults, b: RunResults, k: int, a_label: str = "A", b_label: str = "B") -> PerQueryDiff:
    """The queries A and B split on at ``k`` (module docstring)."""
    metric = at("hit_rate", k)
    a_rows = {row.query_id: row for row in a.per_query if metric in row.metrics}
    b_rows = {row.query_id: row for row in b.per_query if metric in row.metrics}
    a_k, b_k = int(a.meta.get("context_k", k)), int(b.meta.get("context_k", k))
    splits = []
    for query_id in sorted(a_rows.keys() & b_rows.keys()):
        ra, rb = a_rows[query_id], b_rows[query_id]
        hit_a, hit_b = ra.metrics[metric] >= 1, rb.metrics[metric] >= 1
        rank_a, rank_b = first_relevant_rank(ra), first_relevant_rank(rb)
        if hit_a != hit_b:
            kind = A_ONLY if hit_a else B_ONLY
        elif rank_a != rank_b:
            kind = RANK_MOVED
        else:
            continue
        splits.append(QuerySplit(query_id, ra.query, list(ra.tags), kind, rank_a, rank_b,
                                 ra.outcome_class(a_k), rb.outcome_class(b_k)))
    splits.sort(key=lambda s: (KINDS.index(s.kind), -_move(s), s.query_id))
    return PerQueryDiff(a_label, b_label, k, len(a_rows.keys() & b_rows.keys()), splits)


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def format_text(diff: PerQueryDiff, limit: int = 40) -> str:
    """Terminal text: counts, then up to ``limit`` queries per kind."""
    lines = [f"A = {diff.a_label}", f"B = {diff.b_label}",
             f"{diff.n_paired} paired queries at k={diff.k}: " + ", ".join(f"{diff.count(kind)} {kind}" for kind in KINDS)]
    for kind in KINDS:
        chosen = [s for s in diff.splits if s.kind == kind]
        if not chosen:
            continue
        lines += ["", f"{kind} ({len(chosen)}):", "  query_id  rank A -> B  class A / B  tags  query"]
        for s in chosen[:limit]:
            lines.append(f"  {s.query_id}  {_rank(s.a_rank)} -> {_rank(s.b_rank)}  {s.a_class} / {s.b_class}  "
                         f"[{', '.join(s.tags)}]  {s.query[:70]}")
        if len(chosen) > limit:
            lines.append(f"  ... {len(chosen) - limit} more (see the JSON/HTML artifact)")
    return "\n".join(lines)


def format_html(diff: PerQueryDiff) -> str:
    """A standalone HTML page: one table per kind."""
    esc = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>per-query diff</title>",
             "<style>body{font:13px sans-serif}td,th{padding:2px 8px;text-align:left;vertical-align:top}"
             "th{background:#eee}</style>",
             f"<p><b>A</b> = {esc(diff.a_label)}<br><b>B</b> = {esc(diff.b_label)}<br>{diff.n_paired} paired queries, "
             f"hit at k={diff.k}: " + ", ".join(f"{diff.count(kind)} {esc(kind)}" for kind in KINDS) + "</p>"]
    for kind in KINDS:
        chosen = [s for s in diff.splits if s.kind == kind]
        parts.append(f"<h3>{esc(kind)} ({len(chosen)})</h3>")
        if not chosen:
            continue
        parts.append("<table><tr><th>query_id</th><th>rank A</th><th>rank B</th><th>class A</th><th>class B</th>"
                     "<th>tags</th><th>query</th></tr>")
        for s in chosen:
            cells = [s.query_id, _rank(s.a_rank), _rank(s.b_rank), s.a_class, s.b_class, ", ".join(s.tags), s.query]
            parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"
