"""``ragexp evalset queries``: from query logs to N candidate questions for the eval set.

1. Stream every log (:mod:`~ragexp.candidates.log_reader`); leave out queries holding personal
   data or secrets (:mod:`~ragexp.candidates.personal_data`); merge exact duplicates, keeping
   counts (:mod:`~ragexp.candidates.distinct`). Memory grows with the number of distinct queries.
2. Embed the distinct queries, all of them or at most ``max_distinct``: then the ``max_distinct // 2``
   most frequent plus a seeded uniform draw of the rest, so the rare tail is represented (the cap
   bounds the embedding time and memory; the command prints it when it applies).
3. Merge near duplicates at a cosine threshold chosen on labelled pairs shipped with ragexp, never
   on the log (:mod:`~ragexp.candidates.near_duplicates`), or given by the user.
4. Draw N candidates stratified over k-means topic clusters (:mod:`~ragexp.candidates.stratify`).
5. Write them as JSONL, one candidate per line (docs/evalset-format.md, "Candidates and drafts"),
   whole or not at all (:func:`~ragexp.candidates.jsonl_file.write_jsonl`).

Every step's count is in the returned :class:`ImportReport`; nothing is dropped without a count.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragexp.candidates.distinct import DistinctQueries
from ragexp.config.bounds import MAX_EMBEDDED_QUERIES, MAX_SAMPLE, check_count
from ragexp.candidates.jsonl_file import write_jsonl
from ragexp.candidates.log_reader import MAX_LINE_CHARS, LogStats, read_log
from ragexp.candidates.near_duplicates import (
    Threshold,
    fit_threshold,
    merge_near_duplicates,
)
from ragexp.candidates.stratify import stratified_sample
from ragexp.errors import RagexpInputError
from ragexp.runtime import progress

DEFAULT_MAX_DISTINCT = 20_000
MAX_LISTED_VARIANTS = 10


@dataclass
class ImportReport:
    logs: int = 0
    lines: LogStats = field(default_factory=LogStats)
    queries: int = 0
    left_out: Counter = field(default_factory=Counter)  # kind -> queries
    no_words: int = 0
    exact_duplicates: int = 0
    distinct: int = 0
    embedded: int = 0
    threshold: Threshold | None = None
    near_duplicates: int = 0
    kept: int = 0
    clusters: int = 0
    sampled: int = 0
    read_s: float = 0.0
    embed_s: float = 0.0

    def reading_lines(self) -> list[str]:
        """What reading the logs counted, one fact a line."""
        rate = f", {self.lines.lines / self.read_s:,.0f} lines/s" if self.read_s > 0 else ""
        out = [f"read {self.lines.lines:,} lines from {self.logs} log file(s) in {self.read_s:.1f} s{rate}: {self.queries:,} queries"
               + (f" ({self.lines.blank:,} blank lines skipped)" if self.lines.blank else "")]
        if self.lines.too_long:
            out.append(f"skipped {self.lines.too_long:,} lines longer than {MAX_LINE_CHARS:,} characters (not queries)")
        left = sum(self.left_out.values())
        kinds = ", ".join(f"{count:,} {kind}" for kind, count in self.left_out.most_common())
        out.append(f"left out {left:,} queries holding personal data or secrets" + (f": {kinds}" if kinds else ""))
        if self.no_words:
            out.append(f"left out {self.no_words:,} queries without a letter or digit")
        out.append(f"exact duplicates (same words ignoring case, punctuation, spacing): {self.exact_duplicates:,} merged, "
                   f"{self.distinct:,} distinct queries")
        return out

    def embedding_lines(self, max_distinct: int) -> list[str]:
        """What is embedded and the near-duplicate threshold, before the embedding starts."""
        out = []
        if self.embedded < self.distinct:
            out.append(f"embedding {self.embedded:,} of {self.distinct:,} distinct queries: the {max_distinct // 2:,} most frequent "
                       f"and a random draw of the rest (--max-distinct {max_distinct:,}); the others cannot be sampled")
        out.append(f"near-duplicate threshold: cosine >= {self.threshold.value:g}, {self.threshold.how}")
        return out

    def sampling_lines(self) -> list[str]:
        return [f"near duplicates: {self.near_duplicates:,} merged, {self.kept:,} queries left (embedding took {self.embed_s:.1f} s)",
                f"clusters: {self.clusters} (k-means on the embeddings); sampled {self.sampled} candidates"]

def _embedded_subset(counts: np.ndarray, cap: int, seed: int) -> np.ndarray:
    """Positions of the distinct queries to embed: all, or the ``cap // 2`` most frequent plus a
    seeded uniform draw of the rest, up to ``cap``; in first-seen order."""
    if len(counts) <= cap:
        return np.arange(len(counts))
    order = np.argsort(-counts, kind="stable")
    head = order[: cap // 2]
    tail = np.random.default_rng(seed).choice(order[cap // 2 :], cap - len(head), replace=False)
    return np.sort(np.concatenate([head, tail]))


def _read_logs(logs: Sequence[Path], field_name: str | None, fmt: str | None, report: ImportReport) -> DistinctQueries:
    table = DistinctQueries()
    started = time.perf_counter()
    for path in logs:
        source = table.add_source(str(path))
        lines = read_log(path, field=field_name, fmt=fmt, stats=report.lines)
        for line, query in progress.bar(lines, desc=f"reading {path.name}", unit=" lines", unit_scale=True, mininterval=1.0, disable=None):
            table.add(query, source, line)
    report.read_s = time.perf_counter() - started
    report.logs, report.queries = len(logs), table.queries
    report.left_out, report.no_words = table.left_out, table.no_words
    report.exact_duplicates, report.distinct = table.duplicates, len(table.entries)
    return table


def import_queries(
    logs: Sequence[Path],
    sample_size: int,
    out: Path,
    *,
    encode: Callable[..., np.ndarray],
    model_name: str,
    field_name: str | None = None,
    fmt: str | None = None,
    threshold: float | None = None,
    max_distinct: int = DEFAULT_MAX_DISTINCT,
    seed: int = 0,
    announce: Callable[[str], None] = print,
) -> ImportReport:
    """Steps 1-5 of the module docstring; ``encode(texts, show_progress=...)`` returns unit rows.
    ``announce`` gets each line of the report as soon as its step is done."""
    if sample_size < 1:
        raise RagexpInputError(f"must be at least 1, got {sample_size}", field="--sample")
    check_count(sample_size, "--sample", high=MAX_SAMPLE)
    check_count(max_distinct, "--max-distinct", low=2, high=MAX_EMBEDDED_QUERIES)
    if threshold is not None and not 0.0 < threshold <= 1.0:
        raise RagexpInputError(f"must be a cosine in (0, 1], got {threshold}", field="--threshold")
    if max_distinct < 2:
        raise RagexpInputError(f"must be at least 2, got {max_distinct}", field="--max-distinct")
    if not out.parent.is_dir():
        raise RagexpInputError("the folder to write the candidates into does not exist", file=out.parent, field="--out")
    if out.is_dir():
        raise RagexpInputError("is a folder; name the candidates file to write, e.g. candidates.jsonl", file=out, field="--out")
    for log in logs:
        if log.exists() and out.exists() and os.path.samefile(log, out):
            raise RagexpInputError("is one of the logs read (it would be overwritten by the candidates); name another file",
                                   file=out, field="--out")
    report = ImportReport()
    table = _read_logs(logs, field_name, fmt, report)
    for line in report.reading_lines():
        announce(line)
    if not table.entries:
        raise RagexpInputError("no query is left to sample: every query was left out (see the counts above)", field="LOG")
    counts = np.array([entry.count for entry in table.entries], dtype=np.int64)
    subset = _embedded_subset(counts, max_distinct, seed)
    report.embedded = len(subset)

    started = time.perf_counter()
    report.threshold = Threshold(threshold, "given with --threshold") if threshold is not None else fit_threshold(encode, model_name)
    for line in report.embedding_lines(max_distinct):
        announce(line)
    vectors = encode([table.entries[i].most_common_form() for i in subset], show_progress=True)
    report.embed_s = time.perf_counter() - started

    leader = merge_near_duplicates(vectors, counts[subset], report.threshold.value)
    kept = np.flatnonzero(leader == np.arange(len(leader)))
    members: dict[int, list[int]] = {}
    for position, target in enumerate(leader):
        if target != position:
            members.setdefault(int(target), []).append(position)
    frequency = np.array([counts[subset[k]] + sum(counts[subset[j]] for j in members.get(int(k), ())) for k in kept])
    report.near_duplicates, report.kept = len(subset) - len(kept), len(kept)

    sample = stratified_sample(vectors[kept], frequency, sample_size, seed)
    report.clusters, report.sampled = sample.k, len(sample.picked)
    for line in report.sampling_lines():
        announce(line)
    sizes = np.bincount(sample.cluster, minlength=sample.k)
    traffic = np.bincount(sample.cluster, weights=frequency, minlength=sample.k)
    candidates = []
    for position in sample.picked:
        k = int(kept[position])
        cluster = int(sample.cluster[position])
        candidates.append(_candidate(table, subset, vectors, k, members.get(k, []), int(frequency[position]),
                                     cluster, int(sizes[cluster]), int(traffic[cluster])))
    write_jsonl(out, candidates)
    return report


def _candidate(table: DistinctQueries, subset: np.ndarray, vectors: np.ndarray, k: int, merged: list[int],
               frequency: int, cluster: int, cluster_size: int, cluster_frequency: int) -> dict:
    """One candidate line: the query's most frequent wording, ``source: "log"`` (the eval-set item
    source it becomes), the log file and line where it was first seen, its frequency (near
    duplicates included), its cluster, and the wordings merged into it."""
    entry = table.entries[subset[k]]
    query = entry.most_common_form()
    variants = [{"query": text, "count": count} for text, count in entry.form_counts().most_common() if text != query]
    for j in merged:
        other = table.entries[subset[j]]
        similarity = round(float(vectors[k] @ vectors[j]), 3)
        variants += [{"query": text, "count": count, "similarity": similarity} for text, count in other.form_counts().most_common()]
    variants.sort(key=lambda variant: -variant["count"])
    return {"query": query, "source": "log", "log": table.sources[entry.source], "line": entry.line, "frequency": frequency,
            "cluster": cluster, "cluster_size": cluster_size, "cluster_frequency": cluster_frequency,
            "variants": variants[:MAX_LISTED_VARIANTS], "n_variants": len(variants)}

