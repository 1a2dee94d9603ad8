"""How far two annotators of the same questions agree (TREC-style assessor agreement).

Over the pairs of :func:`ragexp.annotation.judgments.paired_judgments`:

- **answerability**: Cohen's kappa of the two ``answerable`` flags over all n items;
- **document relevance**: Cohen's kappa of relevant / not relevant over the (item, document)
  pairs *both* judged (a document one annotator never judged is counted, not guessed);
- **evidence overlap**: per item where either marked evidence (grade >= 1), with ``A`` and ``B``
  the characters each covered, ``F1 = 2 |A & B| / (|A| + |B|)`` (equal to the F1 of one read as
  predictions of the other, either way round); micro ``2 sum |A & B| / sum (|A| + |B|)``, macro
  the mean of the items' F1;
- **disagreements**: the items where the flags differ, a document both judged got different
  verdicts, or the evidence F1 is below ``span_threshold``.

kappa = (p_o - p_e) / (1 - p_e) with its Fleiss-Cohen-Everitt interval
(:func:`ragexp.judging.calibration.kappa_interval.kappa_interval`, where its undefined cases are
described).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragexp.annotation.judgments import Interval, ItemJudgments
from ragexp.judging.calibration.kappa_interval import KappaInterval, kappa_interval

ANSWERABLE, UNANSWERABLE = "answerable", "unanswerable"
RELEVANT, NOT_RELEVANT = "relevant", "not relevant"


@dataclass(frozen=True)
class Kappa:
    """A kappa with its interval and the raw agreement it comes from (``agreed`` of ``n``)."""

    interval: KappaInterval
    agreed: int

    @property
    def n(self) -> int:
        return self.interval.n

    def render(self) -> str:
        ci = self.interval
        if ci.kappa is None:
            value = "kappa undefined (no units, or both gave every unit the same label)"
        elif ci.low is None:
            value = f"kappa {ci.kappa:.3f} (no interval: one annotator gave every unit the same label)"
        else:
            value = f"kappa {ci.kappa:.3f} ({ci.confidence:.0%} CI {ci.low:.3f} to {ci.high:.3f})"
        return f"{value}, agreed on {self.agreed}/{self.n}"

    def to_dict(self) -> dict:
        ci = self.interval
        return {"kappa": ci.kappa, "se": ci.se, "ci_low": ci.low, "ci_high": ci.high, "n": ci.n, "agreed": self.agreed}


@dataclass(frozen=True)
class Disagreement:
    item_id: str
    query: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Agreement:
    items: int
    answerable: Kappa
    relevance: Kappa
    judged_by_one: int  # (item, document) pairs only one annotator judged
    span_items: int  # items where either marked evidence
    span_micro_f1: float | None
    span_macro_f1: float | None
    span_threshold: float
    disagreements: tuple[Disagreement, ...]

    def render(self, first: str, second: str) -> str:
        spans = ("no item has evidence" if self.span_items == 0 else
                 f"F1 micro {self.span_micro_f1:.3f}, macro {self.span_macro_f1:.3f} over {self.span_items} items with evidence")
        lines = [f"agreement of {first} and {second} on {self.items} questions",
                 f"  answerability       {self.answerable.render()} items",
                 f"  document relevance  {self.relevance.render()} documents both judged "
                 f"({self.judged_by_one} judged by one only, not counted)",
                 f"  evidence overlap    {spans}",
                 f"  disagreements       {len(self.disagreements)} items (flags, a document's verdict, or evidence F1 "
                 f"< {self.span_threshold:g})"]
        lines += [f"    {d.item_id}: {'; '.join(d.reasons)}" for d in self.disagreements]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"items": self.items, "answerable": self.answerable.to_dict(), "relevance": self.relevance.to_dict(),
                "judged_by_one": self.judged_by_one, "span_items": self.span_items,
                "span_micro_f1": self.span_micro_f1, "span_macro_f1": self.span_macro_f1,
                "span_threshold": self.span_threshold,
                "disagreements": [{"id": d.item_id, "query": d.query, "reasons": list(d.reasons)} for d in self.disagreements]}


def covered(regions: dict[str, tuple[Interval, ...]]) -> int:
    """Characters covered by merged regions."""
    return sum(end - start for intervals in regions.values() for start, end in intervals)


def overlap(first: dict[str, tuple[Interval, ...]], second: dict[str, tuple[Interval, ...]]) -> int:
    """Characters covered by both (regions merged as :func:`~ragexp.annotation.judgments.merge` does)."""
    total = 0
    for doc_id, ours in first.items():
        theirs = second.get(doc_id, ())
        i = j = 0
        while i < len(ours) and j < len(theirs):
            total += max(0, min(ours[i][1], theirs[j][1]) - max(ours[i][0], theirs[j][0]))
            if ours[i][1] <= theirs[j][1]:
                i += 1
            else:
                j += 1
    return total


def agreement(pairs: list[tuple[ItemJudgments, ItemJudgments]], names: tuple[str, str], span_threshold: float) -> Agreement:
    """The agreement of two annotators (module docstring); ``names`` label them in the reasons."""
    first_flags = [ANSWERABLE if a.answerable else UNANSWERABLE for a, _ in pairs]
    second_flags = [ANSWERABLE if b.answerable else UNANSWERABLE for _, b in pairs]
    first_docs, second_docs, judged_by_one = [], [], 0
    both_size = both_overlap = 0
    item_f1: list[float] = []
    disagreements = []
    for a, b in pairs:
        reasons = []
        if a.answerable != b.answerable:
            reasons.append(f"answerable: {names[0]} {_yes(a.answerable)}, {names[1]} {_yes(b.answerable)}")
        for doc_id in sorted(a.documents.keys() | b.documents.keys()):
            if doc_id not in a.documents or doc_id not in b.documents:
                judged_by_one += 1
                continue
            first_docs.append(RELEVANT if a.documents[doc_id] else NOT_RELEVANT)
            second_docs.append(RELEVANT if b.documents[doc_id] else NOT_RELEVANT)
            if first_docs[-1] != second_docs[-1]:
                reasons.append(f"{doc_id}: {names[0]} {first_docs[-1]}, {names[1]} {second_docs[-1]}")
        if a.has_positive or b.has_positive:
            size, common = covered(a.regions) + covered(b.regions), overlap(a.regions, b.regions)
            both_size, both_overlap = both_size + size, both_overlap + common
            item_f1.append(2 * common / size)
            if item_f1[-1] < span_threshold:
                reasons.append(f"evidence F1 {item_f1[-1]:.2f}")
        if reasons:
            disagreements.append(Disagreement(a.id, a.query, tuple(reasons)))
    return Agreement(
        items=len(pairs),
        answerable=_kappa(first_flags, second_flags),
        relevance=_kappa(first_docs, second_docs),
        judged_by_one=judged_by_one,
        span_items=len(item_f1),
        span_micro_f1=2 * both_overlap / both_size if item_f1 else None,
        span_macro_f1=sum(item_f1) / len(item_f1) if item_f1 else None,
        span_threshold=span_threshold,
        disagreements=tuple(disagreements),
    )


def _kappa(first: list[str], second: list[str]) -> Kappa:
    return Kappa(kappa_interval(first, second), sum(x == y for x, y in zip(first, second)))


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
