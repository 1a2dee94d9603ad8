"""Faithfulness: the share of an answer's claims that the retrieved context supports.

Definition
----------
The answer is split into claims (:mod:`ragexp.judging.claims`); a judge decides, for each claim
and against the retrieved context ALONE (never the gold answer, never the question), whether the
context supports it. Then::

    faithfulness = n_supported / (n_supported + n_unsupported)

Claims the judge could not decide (a verdict that is neither yes nor no, a timeout, an HTTP error
after retries) are *judge failures*: listed with their error, counted in ``judge_failures``, and
excluded from the ratio — never read as "unsupported".

Undefined faithfulness is reported as absent (``score is None``), never as 0, 1 or NaN:

- zero claims — an empty answer or a refusal asserts nothing (``no_claims``; the run counts them
  as ``n_no_claims``);
- every claim a judge failure (``all_failed``).

The default judge prompt is the method article's :data:`FAITHFULNESS_PROMPT`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from ragexp.data.context import is_title_copy
from ragexp.judging.correctness import is_refusal

FAITHFULNESS_PROMPT = """Context:
{context}

Claim: {claim}

Is this claim directly supported by the context above? Answer only "yes" or "no".
"""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's decision on one claim. ``supported is None`` means the judge failed
    (``error`` says why); ``score`` is the judge's continuous support score where it has one;
    ``evidence`` the ``[start, end]`` of the context sentence the verdict rests on, where the
    judge has one (:mod:`ragexp.judging.evidence`)."""

    claim: str
    supported: bool | None
    score: float | None
    raw: str
    error: str | None = None
    evidence: list[int] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class ClaimJudge(Protocol):
    """What faithfulness needs from a judge."""

    model_id: str

    def split_claims(self, answer: str) -> list[str]:
        """The claims of ``answer`` (``[]`` for an empty answer)."""

    def judge_claims(self, claims: Sequence[str], context: str) -> list[Verdict]:
        """One verdict per claim, in order, judged against ``context`` alone. A judge may also
        offer ``judge_claims_batch(items)``: the same for many ``(claims, context)`` at once."""


@dataclass
class FaithfulnessResult:
    """One query's faithfulness. ``score`` is ``None`` when undefined (see module docstring)."""

    score: float | None
    verdicts: list[Verdict] = field(default_factory=list)
    undefined_reason: str | None = None
    context: str = ""

    @property
    def n_claims(self) -> int:
        return len(self.verdicts)

    @property
    def n_supported(self) -> int:
        return sum(1 for v in self.verdicts if v.supported is True)

    @property
    def judge_failures(self) -> int:
        return sum(1 for v in self.verdicts if v.supported is None)

    def to_record(self) -> dict:
        """The per-query fields the runner stores: claims with verdicts, the context they were
        judged against (``judge_context``, what ``ragexp judge sample`` shows a reviewer),
        counts, and why the score is undefined."""
        record = {
            "claims": [v.to_dict() for v in self.verdicts],
            "judge_context": self.context,
            "n_claims": self.n_claims,
            "n_supported": self.n_supported,
            "judge_failures": self.judge_failures,
        }
        if self.undefined_reason:
            record["faithfulness_undefined"] = self.undefined_reason
        return record


def faithfulness(answer: str, context: str, judge: ClaimJudge) -> FaithfulnessResult:
    """Split ``answer`` into claims and judge each against ``context`` (the generator's context)."""
    return faithfulness_batch([(answer, context)], judge)[0]


def faithfulness_batch(items: Sequence[tuple[str, str]], judge: ClaimJudge) -> list[FaithfulnessResult]:
    """:func:`faithfulness` for each ``(answer, context)``; the claims of all answers go to the
    judge in one ``judge_claims_batch`` call where the judge has one. A claim that is nothing but a
    section title of its context (:func:`ragexp.data.context.is_title_copy`: ``Downgrades``, a
    sentence the answer made of a title) is no claim and is not judged."""
    claims = [[] if is_refusal(answer) else [claim for claim in judge.split_claims(answer) if not is_title_copy(claim, context)]
              for answer, context in items]
    todo = [i for i, answer_claims in enumerate(claims) if answer_claims]
    batch = getattr(judge, "judge_claims_batch", None)
    if batch is not None:
        judged = batch([(claims[i], items[i][1]) for i in todo]) if todo else []
    else:
        judged = [judge.judge_claims(claims[i], items[i][1]) for i in todo]
    verdicts: dict[int, list[Verdict]] = dict(zip(todo, judged))
    return [score_verdicts(verdicts.get(i, []), context) for i, (_, context) in enumerate(items)]


def score_verdicts(verdicts: Sequence[Verdict], context: str = "") -> FaithfulnessResult:
    """``supported / decided`` over the verdicts whose ``supported`` is not ``None``."""
    verdicts = list(verdicts)
    decided = [v for v in verdicts if v.supported is not None]
    if not verdicts:
        return FaithfulnessResult(score=None, undefined_reason="no_claims", context=context)
    if not decided:
        return FaithfulnessResult(score=None, verdicts=verdicts, undefined_reason="all_failed", context=context)
    score = sum(v.supported for v in decided) / len(decided)
    return FaithfulnessResult(score=score, verdicts=verdicts, context=context)


def aggregate_faithfulness(results: Iterable[FaithfulnessResult]) -> dict[str, float]:
    """Run-level numbers: the mean over queries where faithfulness is defined (absent if none),
    and the counts ``n_faithfulness_scored``, ``n_no_claims``, ``n_all_claims_failed``,
    ``judge_failures`` (claims), ``n_claims``."""
    results = list(results)
    scores = [r.score for r in results if r.score is not None]
    out = {
        "n_faithfulness_scored": float(len(scores)),
        "n_no_claims": float(sum(r.undefined_reason == "no_claims" for r in results)),
        "n_all_claims_failed": float(sum(r.undefined_reason == "all_failed" for r in results)),
        "judge_failures": float(sum(r.judge_failures for r in results)),
        "n_claims": float(sum(r.n_claims for r in results)),
    }
    if scores:
        out["faithfulness"] = sum(scores) / len(scores)
    return out
