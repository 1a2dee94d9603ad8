"""Queue work from a logged run: its unjudged top-k units (pool extension) or its failures.

``unjudged_units(results, k)``: per query, the units of the run's top ``k`` (trec order) that the
run's qrels give no grade, positive or 0: exactly the units ``judged_at_{k}`` does not count, so
judging all of them brings the run's judged@k to 1. Unit offsets come from re-chunking the current
corpus with the run's own chunking (its logged ``config/resolved.yaml``); a unit that no longer
exists (the corpus changed since the run) is counted, not guessed.

``failed_queries(results)``: the run's queries classed ``retrieval_failure`` or ``hallucinated``
(:mod:`ragexp.judging.failure`), each queued with the top ``context_k`` units the generator saw. A
question already in the eval set is reopened for review with those units; a question the eval set
does not hold yet (a run on production questions) is queued as a new item with ``source: failure``.
A retrieval-only run has no generation, so no hallucination: its retrieval failures (no relevant
unit among the top ``context_k``, :meth:`~ragexp.evaluation.results.QueryResult.outcome_class`) are queued and
the report says that hallucinations need a run with a generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragexp.annotation.session import Session
from ragexp.datamodel import Chunk
from ragexp.evaluation.results import RunResults
from ragexp.judging.failure import FailureClass
from ragexp.metrics.ranking import trec_order

FAILURE_CLASSES = (FailureClass.RETRIEVAL_FAILURE.value, FailureClass.HALLUCINATED.value)


@dataclass
class QueueReport:
    queries: int = 0  # queries with something queued
    units: int = 0  # units queued for judging
    new_items: int = 0  # questions the eval set did not hold
    missing_units: list[str] = field(default_factory=list)  # unit ids the current corpus no longer has
    note: str = ""  # what the run could not give (a retrieval-only run: no hallucinations)

    def render(self, what: str) -> str:
        text = f"queued {self.units} {what} on {self.queries} questions ({self.new_items} new)"
        if self.note:
            text += f"; {self.note}"
        if self.missing_units:
            text += (f"; {len(self.missing_units)} units are not in the current corpus under the run's chunking "
                     f"(changed since the run), e.g. {self.missing_units[0]}")
        return text


def unjudged_units(results: RunResults, k: int) -> dict[str, list[str]]:
    """``{query id: [unit id, ...]}`` of top-``k`` units without a grade in the run's qrels."""
    out = {}
    for row in results.per_query:
        units = [unit for unit, _ in trec_order(row.ranking)[:k] if unit not in row.relevant]
        if units:
            out[row.query_id] = units
    return out


def generated(results: RunResults) -> bool:
    """Whether the run generated answers (its rows carry a generation failure class)."""
    return any(row.failure_class for row in results.per_query)


def failed_queries(results: RunResults) -> dict[str, str]:
    """``{query id: failure class}`` of the retrieval failures and hallucinations (module docstring)."""
    depth = int(results.meta.get("context_k") or 5)
    classes = {row.query_id: row.outcome_class(depth) for row in results.per_query}
    return {qid: cls for qid, cls in classes.items() if cls in FAILURE_CLASSES}


def _queue(session: Session, results: RunResults, wanted: dict[str, list[str]], reasons: dict[str, str],
           chunks: dict[str, Chunk], new_source: str, report: QueueReport) -> None:
    rows = {row.query_id: row for row in results.per_query}
    with session.lock:  # held until saved: another server on the file waits
        session.reload_if_changed()
        for qid, unit_ids in wanted.items():
            units = []
            for unit_id in unit_ids:
                chunk = chunks.get(unit_id)
                if chunk is None:
                    report.missing_units.append(unit_id)
                    continue
                units.append({"unit_id": unit_id, "doc_id": chunk.doc_id, "start": chunk.start, "end": chunk.end})
            if session.entry(qid) is None:
                row = rows[qid]
                source = new_source or row.source or "hand"
                report.new_items += session.queue([{"id": qid, "query": row.query, "source": source}], "run") or 0
            if session.attach_review(qid, units, reasons[qid]):
                report.queries += 1
                report.units += len(units)
        session.save()


def queue_unjudged(session: Session, results: RunResults, chunks: dict[str, Chunk], k: int) -> QueueReport:
    report = QueueReport()
    wanted = unjudged_units(results, k)
    run = results.meta.get("run_id") or results.meta.get("run_name", "the run")
    _queue(session, results, wanted, dict.fromkeys(wanted, f"unjudged in the top {k} of run {run}"), chunks, "", report)
    return report


def queue_failures(session: Session, results: RunResults, chunks: dict[str, Chunk]) -> QueueReport:
    report = QueueReport()
    classes = failed_queries(results)
    depth = int(results.meta.get("context_k") or 5)
    rows = {row.query_id: row for row in results.per_query}
    wanted = {qid: [unit for unit, _ in trec_order(rows[qid].ranking)[:depth]] for qid in classes}
    _queue(session, results, wanted, classes, chunks, "failure", report)
    if not generated(results):
        report.note = (f"the run is retrieval-only, so these are its retrieval failures (no relevant unit in the top "
                       f"{depth}); hallucinations need a run with a generator (generator=... on ragexp run)")
    return report
