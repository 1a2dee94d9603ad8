"""Two annotators' files merged into one eval set to adjudicate, neither side's verdicts preselected.

:func:`queue_adjudication` fills a new annotation session ``FILE`` (opened later with ``ragexp
evalset annotate FILE``) from two annotators' eval sets of the same questions:

- an item both gave alike (the same evidence with the same grades, answerability, gold answer(s),
  key facts and tags) is written to ``FILE`` as it is: settled, nothing to adjudicate;
- any other item is queued with only what both gave alike (the evidence equal in span and grade,
  ``answerable``, ``gold_answer``, ``answers`` and ``key_facts`` when equal, the tags both gave):
  nothing one annotator alone said is set, so no verdict starts preselected. Each evidence entry
  only one gave becomes a unit to judge (a span as itself, a whole document as ``[0, len(text))``)
  carrying both annotators' verdicts on it (:func:`verdict`), and the item's review record holds
  both sides' answerability, gold answer, key facts and tags, side by side. An item that is a
  disagreement of :mod:`ragexp.annotation.agreement` is queued with its reasons; one that differs
  less (evidence F1 at or above the threshold, a grade, a tag, the answer's wording) with the
  differences named.

On the page every dispute is decided explicitly (:func:`unsettled`, which the server checks before
it marks the question reviewed): each queued passage by evidence over exactly it (relevant or not:
a narrower span marked inside a wider disputed passage decides the narrower one only), a disputed
answerability by ``u`` or by relevant evidence, and differing gold answers of a question that stays
answerable by taking one side's answer or typing one.

``FILE``'s header records the adjudicator and both source files (name, annotator, SHA-256), and
its name is the first file's eval-set name with ``-adjudicated``, so runs on it get their own
MLflow experiment (:func:`ragexp.tracking.experiments.experiment_name`), never an annotator's.
``FILE`` must not exist yet, or be a queue of the same two files (same bytes): queueing again then
adds nothing already there. Written through :class:`~ragexp.annotation.session.Session`, the
page's own reader and writer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from ragexp.annotation.agreement import Agreement
from ragexp.annotation.session import Session
from ragexp.data.evalset_schema import AdjudicationRecord, SourceRecord
from ragexp.datamodel import Corpus, EvalItem, Evidence, is_relevant
from ragexp.errors import RagexpInputError
from ragexp.stored import limits

ORIGIN = "adjudication"
OVERLAP_ORDER = ("within", "around", "overlap", "document")
"""How evidence can overlap a passage without being over exactly it (:func:`verdict`), closest first."""


@dataclass(frozen=True)
class QueuedAdjudication:
    settled: int  # items both gave alike, written as they are
    disagreements: int  # queued: disagreements by the agreement's definition
    differing: int  # queued: items that differ less
    units: int  # passages to judge
    already: int  # items the file held already (queued before)


def source_record(path: Path, annotator: str | None) -> SourceRecord:
    """The record of an annotator's file as it is now (read through :mod:`ragexp.stored.limits`)."""
    return SourceRecord(file=path.name, annotator=annotator, sha256=hashlib.sha256(limits.read_bytes(path)).hexdigest())


def queue_adjudication(session: Session, result: Agreement, items: tuple[dict[str, EvalItem], dict[str, EvalItem]],
                       names: tuple[str, str], corpus: Corpus, adjudicator: str,
                       sources: tuple[SourceRecord, SourceRecord], name: str) -> QueuedAdjudication:
    """Fill ``session`` from the two annotators' ``items`` (by id, in the first file's order) and save it
    (module docstring); ``name``: the first file's eval-set name. :class:`RagexpInputError` when the
    session's file holds something else."""
    first, second = items
    reasons = {d.item_id: d.reasons for d in result.disagreements}
    record = AdjudicationRecord(adjudicator=adjudicator, sources=sources)
    settled = disputed = differing = units = already = 0
    with session.lock:  # held until saved: another server on the file waits
        session.reload_if_changed()
        _check_target(session, record)
        if session.header.adjudication is None:
            session.header = replace(session.header, adjudication=record, name=f"{name}-adjudicated")
        for item_id, a in first.items():
            b = second[item_id]
            if session.entry(item_id) is not None:
                already += 1
                continue
            row = _shared_row(a, b, corpus)
            if _alike(a, b):
                settled += session.queue([row], ORIGIN, confirmed=True)
                continue
            session.queue([row], ORIGIN)
            review = [_unit(e, corpus, a, b) for e in dict.fromkeys(a.evidence + b.evidence)
                      if (e in a.evidence) != (e in b.evidence)]
            review = list({unit["unit_id"]: unit for unit in review}.values())
            if item_id in reasons:
                disputed += 1
                reason = f"{names[0]} and {names[1]} disagree: {'; '.join(reasons[item_id])}"
            else:
                differing += 1
                reason = f"{names[0]} and {names[1]} differ: {'; '.join(_differences(a, b))}"
            session.attach_review(item_id, review, reason, _sides(a, b, names))
            units += len(review)
        if already < len(first) or not already:
            session.save()
    return QueuedAdjudication(settled, disputed, differing, units, already)


def _check_target(session: Session, record: AdjudicationRecord) -> None:
    """The file must be new, or a queue of the same two files (module docstring)."""
    if not session.entries and session.header.adjudication is None:
        return
    if session.header.adjudication is None or session.header.adjudication.sources != record.sources:
        raise RagexpInputError("queue into a new file: the adjudicated set is built from both annotators' files, so "
                               "that neither side's verdicts start preselected (this file holds other items, or a queue "
                               "of other files)", file=session.evalset, field="--queue")


def _alike(a: EvalItem, b: EvalItem) -> bool:
    return (set(a.evidence) == set(b.evidence) and a.answerable == b.answerable and a.gold_answer == b.gold_answer
            and a.answers == b.answers and a.key_facts == b.key_facts and set(a.tags) == set(b.tags))


def _differences(a: EvalItem, b: EvalItem) -> list[str]:
    out = []
    if set(a.evidence) != set(b.evidence):
        out.append(f"evidence ({len(set(a.evidence) ^ set(b.evidence))} entries given by one only)")
    for name in ("gold_answer", "answers", "key_facts"):
        if getattr(a, name) != getattr(b, name):
            out.append(name.replace("_", " "))
    if set(a.tags) != set(b.tags):
        out.append("tags")
    return out


def _shared_row(a: EvalItem, b: EvalItem, corpus: Corpus) -> dict:
    """What both annotators gave alike (module docstring), as a queue row."""
    row = {"id": a.id, "query": a.query, "source": a.source if a.source == b.source else None,
           "evidence": [_evidence_line(e, corpus) for e in a.evidence if e in b.evidence],
           "tags": [tag for tag in a.tags if tag in b.tags]}
    if a.added == b.added and a.added is not None:
        row["added"] = a.added
    if a.answerable == b.answerable:
        row["answerable"] = a.answerable
    if a.gold_answer == b.gold_answer and a.gold_answer:
        row["gold_answer"] = a.gold_answer
    if a.answers == b.answers and a.answers:
        row["answers"] = list(a.answers)
    if a.key_facts == b.key_facts and a.key_facts:
        row["key_facts"] = list(a.key_facts)
    return row


def _sides(a: EvalItem, b: EvalItem, names: tuple[str, str]) -> dict:
    """Both annotators' item fields, side by side, as the page shows them."""
    return {"names": list(names), "answerable": [a.answerable, b.answerable],
            "gold_answer": [a.gold_answer or "", b.gold_answer or ""], "key_facts": [list(a.key_facts), list(b.key_facts)],
            "tags": [list(a.tags), list(b.tags)]}


def _evidence_line(evidence: Evidence, corpus: Corpus) -> dict:
    """As the page writes evidence: a span with its quote (checked at load time), or a whole document."""
    line: dict = {"doc_id": evidence.doc_id}
    if evidence.is_span:
        line |= {"start": evidence.start, "end": evidence.end,
                 "quote": corpus[evidence.doc_id].text[evidence.start:evidence.end]}
    if evidence.grade != 1:
        line["grade"] = evidence.grade
    return line


def verdict(item: EvalItem, doc_id: str, start: int, end: int, length: int) -> dict:
    """What one annotator said about the passage ``[start, end)`` of a document of ``length`` characters:

    - ``{"grade": g, "how": "span"}``: evidence over exactly this passage (``"document"``: the
      passage is the whole document and so was the evidence);
    - otherwise the highest grade of the evidence that overlaps it, ``"how"`` saying how: a span
      ``"within"`` the passage, a span ``"around"`` it (containing it), a span overlapping it partly
      (``"overlap"``), ``"document"`` for whole-document evidence; at equal grades the closest
      (within, around, overlap, document);
    - ``{"grade": None, "how": "unanswerable"}``: nothing on it, and the question marked unanswerable;
    - ``{"grade": None, "how": None}``: not judged."""
    whole = (start, end) == (0, length)
    grades: dict[str, int] = {}
    for e in item.evidence:
        if e.doc_id != doc_id:
            continue
        span = (e.start, e.end) if e.is_span else (0, length)
        if span == (start, end):
            return {"grade": e.grade, "how": "document" if whole and not e.is_span else "span"}
        if span[0] < end and span[1] > start:
            how = ("document" if not e.is_span else "within" if start <= span[0] and span[1] <= end
                   else "around" if span[0] <= start and end <= span[1] else "overlap")
            grades[how] = max(grades.get(how, 0), e.grade)
    if grades:
        how = max(grades, key=lambda h: (grades[h], -OVERLAP_ORDER.index(h)))
        return {"grade": grades[how], "how": how}
    return {"grade": None, "how": None if item.answerable else "unanswerable"}


def _unit(evidence: Evidence, corpus: Corpus, a: EvalItem, b: EvalItem) -> dict:
    length = len(corpus[evidence.doc_id].text)
    start, end = (evidence.start, evidence.end) if evidence.is_span else (0, length)
    return {"unit_id": f"{evidence.doc_id}:{start}-{end}", "doc_id": evidence.doc_id, "start": start, "end": end,
            "verdicts": [verdict(x, evidence.doc_id, start, end, length) for x in (a, b)]}


def decided(unit: dict, evidence: list[dict]) -> bool:
    """Whether the adjudicator decided a queued passage: evidence (either grade) over exactly it.
    Evidence inside, around or overlapping it decides that other passage, not this one."""
    return any(e["doc_id"] == unit["doc_id"] and e.get("start") is not None
               and (e["start"], e["end"]) == (unit["start"], unit["end"]) for e in evidence)


def unsettled(entry: dict) -> str | None:
    """Why an entry queued for adjudication cannot be marked reviewed (``None`` when it can, or
    when it was not queued for adjudication): a queued passage not :func:`decided`; answerability disputed
    and neither ``u`` pressed nor relevant evidence marked; the gold answers differ, the question is
    still answerable and its gold answer is empty (neither taken nor typed)."""
    review = entry.get("review") or {}
    record = review.get("adjudication")
    if record is None:
        return None
    evidence = entry.get("evidence", [])
    open_units = sum(not decided(unit, evidence) for unit in review["units"])
    if open_units:
        return f"{open_units} disputed passage(s) not judged yet: r relevant, x not relevant, Shift+X the rest not relevant"
    answerable = entry.get("answerable", True) is not False
    positive = any(is_relevant(e.get("grade", 1)) for e in evidence)
    if record["answerable"][0] != record["answerable"][1] and answerable and not positive:
        return "answerability is disputed: mark the evidence that answers it, or press u if the corpus does not"
    if record["gold_answer"][0] != record["gold_answer"][1] and answerable and not (entry.get("gold_answer") or "").strip():
        return "the gold answers differ: take one (or type your own)"
    return None
