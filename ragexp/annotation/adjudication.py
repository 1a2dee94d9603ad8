"""Two annotators' disagreements queued for adjudication on the annotation page.

For each item in :attr:`Agreement.disagreements <ragexp.annotation.agreement.Agreement>` the
annotation session of an eval set ``FILE`` (opened later with ``ragexp evalset annotate FILE``) gets:

- when ``FILE`` does not hold the question yet: a new, unconfirmed entry with the item's id and
  question, holding only what both annotators gave alike: the evidence entries equal in span and
  grade, ``answerable`` and ``gold_answer`` when equal, the tags both gave;
- in either case, the evidence only one of them gave (any grade, each as its span; a whole
  document as ``[0, len(text))``) attached for review with the reasons, as ``--from-run`` attaches
  a run's units: the page shows these passages to judge.

A question ``FILE`` already holds (e.g. ``FILE`` is a copy of one annotator's file) keeps its
fields and is reopened for review the same way; one it holds under another id (its own
question) is not queued, and not counted in :attr:`QueuedDisagreements.entries`. Written through
:class:`~ragexp.annotation.session.Session`, the page's own reader and writer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragexp.annotation.agreement import Agreement
from ragexp.annotation.session import Session
from ragexp.data import Corpus, EvalItem, Evidence

ORIGIN = "agreement"


@dataclass(frozen=True)
class QueuedDisagreements:
    entries: int  # disagreements attached for review
    new: int  # of which questions the eval set did not hold
    units: int  # passages to judge


def queue_disagreements(session: Session, result: Agreement, items: tuple[dict[str, EvalItem], dict[str, EvalItem]],
                        names: tuple[str, str], corpus: Corpus) -> QueuedDisagreements:
    """Queue ``result``'s disagreements in ``session`` and save it (module docstring); ``items``:
    each annotator's items by id."""
    first, second = items
    entries = new = units = 0
    with session.lock:  # held until saved: another server on the file waits
        session.reload_if_changed()
        for disagreement in result.disagreements:
            a, b = first[disagreement.item_id], second[disagreement.item_id]
            if session.entry(a.id) is None:
                new += session.queue([_agreed_row(a, b, corpus)], ORIGIN)
            review = [_unit(e, corpus) for e in dict.fromkeys(a.evidence + b.evidence) if (e in a.evidence) != (e in b.evidence)]
            review = list({unit["unit_id"]: unit for unit in review}.values())
            reason = f"{names[0]} and {names[1]} disagree: {'; '.join(disagreement.reasons)}"
            if session.attach_review(a.id, review, reason):
                entries += 1
                units += len(review)
        session.save()
    return QueuedDisagreements(entries, new, units)


def _agreed_row(a: EvalItem, b: EvalItem, corpus: Corpus) -> dict:
    row = {"id": a.id, "query": a.query, "source": a.source if a.source == b.source else None,
           "evidence": [_evidence_line(e, corpus) for e in a.evidence if e in b.evidence],
           "tags": [tag for tag in a.tags if tag in b.tags]}
    if a.answerable == b.answerable:
        row["answerable"] = a.answerable
    if a.gold_answer == b.gold_answer and a.gold_answer:
        row["gold_answer"] = a.gold_answer
    return row


def _evidence_line(evidence: Evidence, corpus: Corpus) -> dict:
    """As the page writes evidence: a span with its quote (checked at load time), or a whole document."""
    line: dict = {"doc_id": evidence.doc_id}
    if evidence.is_span:
        line |= {"start": evidence.start, "end": evidence.end,
                 "quote": corpus[evidence.doc_id].text[evidence.start:evidence.end]}
    if evidence.grade != 1:
        line["grade"] = evidence.grade
    return line


def _unit(evidence: Evidence, corpus: Corpus) -> dict:
    start, end = (evidence.start, evidence.end) if evidence.is_span else (0, len(corpus[evidence.doc_id].text))
    return {"unit_id": f"{evidence.doc_id}:{start}-{end}", "doc_id": evidence.doc_id, "start": start, "end": end}
