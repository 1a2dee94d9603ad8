"""Was the judge checked by a person? The last human review of a judge, and whether it clears the floor.

A judge is named by its :func:`~ragexp.judging.calibration.record.judge_key` (model with its
weights hash, prompt, threshold). ``ragexp judge review`` files each agreement it logs under the
reviewed run's key: tags :data:`TAG_KEY` and :data:`TAG_AT` (UTC, ISO 8601) on that run, next to
``judge_review/kappa`` and its interval. :func:`last_review` finds the newest such review in any
experiment of the store: a review of one run speaks for every run of the same judge, since what
it measured is the judge, and a change of model, prompt or threshold makes a new key that no
review speaks for yet.

A review speaks for a run only when it reviewed **that run's claims, or a run that shares its
judge, generator and eval-set version** (:class:`Scope`: the generator's logged params and the eval
set's fingerprint): a judge's agreement on one generator's answers says little about another's,
whose claims fail in other ways. Among the reviews filed under the judge's key, :func:`last_review`
takes the newest of the run itself, else the newest of a run in the same scope; reviews of other
scopes are named but do not count.

A judge metric (:data:`JUDGE_METRICS`, also per tag or source, or its PPI estimate) is
*verified* when such a review's kappa interval lies above the floor: its **lower bound** is at least
:data:`~ragexp.judging.calibration.record.MIN_KAPPA` unless configured (a kappa of 0.51 whose 95 %
interval reaches 0.02 says "review more", not "checked"). Otherwise it is unverified, one of:
``reviewed, not good enough`` (a review in scope whose interval reaches below the floor, or whose
kappa or interval is undefined; the sentence gives kappa, interval and n), ``reviewed only on other
runs`` (reviews exist, none in scope), or ``never checked by a person``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from ragexp.judging.ppi import PREFIX
from ragexp.metrics.measure import measure

#: On every run with a judge (``ragexp run``): its judge key.
TAG_JUDGE_KEY = "ragexp.judge_key"
#: On a reviewed run: the key of the judge its review checked, and when.
TAG_KEY = "ragexp.judge_review.judge_key"
TAG_AT = "ragexp.judge_review.at"
#: Metrics whose value comes from the judge (directly or through faithfulness); the PPI estimates of
#: some (:mod:`ragexp.evaluation.corrected`) are judge metrics too.
JUDGE_METRICS = ("faithfulness", "claim_faithfulness", "answer_relevance", "generation_failure_rate", "ok_rate")
#: What a gate or a summary does about an unverified judge metric.
WARN, FAIL = "warn", "fail"


def is_judge_metric(key: str) -> bool:
    """Whether results key ``key`` comes from the judge (``faithfulness``, ``tag.x.faithfulness``,
    ``ppi.faithfulness``, ``generation_failure_rate``, ...)."""
    name = measure(key).name
    return name.removeprefix(PREFIX) in JUDGE_METRICS


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def timestamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


#: The kinds of :attr:`ReviewStatus.state`.
VERIFIED, BELOW_FLOOR, OTHER_SCOPE, NEVER = "verified", "reviewed, not good enough", "reviewed only on other runs", \
    "never checked by a person"


@dataclass(frozen=True)
class Scope:
    """What a review must share with a run to speak for it besides the judge: the generator (a
    digest of its logged ``generator`` params) and the eval-set version (its fingerprint)."""

    generator: str
    evalset: str

    @classmethod
    def of(cls, params: Mapping[str, str], tags: Mapping[str, str], evalset_tag: str) -> Scope:
        logged = sorted((key, value) for key, value in params.items() if key == "generator" or key.startswith("generator."))
        return cls(hashlib.sha256(repr(logged).encode()).hexdigest()[:16], tags.get(evalset_tag, ""))


@dataclass(frozen=True)
class ReviewStatus:
    """The review that speaks for a run of judge ``judge_key`` (``run_id`` ``None``: none does; ``why``
    says where it was looked for, ``other`` names a review of another scope when one exists).
    ``same_run``: the review is of the checked run's own claims."""

    judge_key: str
    run_id: str | None = None
    kappa: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    at: dt.datetime | None = None
    why: str = ""
    same_run: bool = False
    other: str = ""

    def state(self, floor: float) -> str:
        """:data:`VERIFIED`, :data:`BELOW_FLOOR`, :data:`OTHER_SCOPE` or :data:`NEVER` (module docstring)."""
        if self.run_id is None:
            return OTHER_SCOPE if self.other else NEVER
        if self.kappa is not None and self.low is not None and self.low >= floor:
            return VERIFIED
        return BELOW_FLOOR

    def verified(self, floor: float) -> bool:
        return self.state(floor) == VERIFIED

    def age(self, when: dt.datetime | None = None) -> str:
        if self.at is None:
            return "unknown age"
        days = ((when or now()) - self.at).total_seconds() / 86400
        return "today" if days < 1 else f"{days:.0f} days ago"

    def describe(self, floor: float, when: dt.datetime | None = None) -> str:
        """One sentence, starting ``verified:`` or ``UNVERIFIED (<state>):``, e.g.
        ``verified: kappa 0.82 (95% CI 0.55 to 0.97, 40 claims), reviewed today on this run`` or
        ``UNVERIFIED (reviewed, not good enough): kappa 0.51 (95% CI 0.02 to 0.86, 20 claims) ...;
        its lower bound 0.02 is below the floor 0.4``."""
        state = self.state(floor)
        if state == NEVER:
            return (f"UNVERIFIED ({NEVER}): judge {self.judge_key} was never reviewed{self.why} (ragexp judge review RUN_ID: "
                    "a person checks 20 of its verdicts)")
        if state == OTHER_SCOPE:
            return (f"UNVERIFIED ({OTHER_SCOPE}): {self.other}; none of a run sharing this run's judge, generator and "
                    "eval-set version (ragexp judge review RUN_ID on this run)")
        interval = "" if self.low is None else f", 95% CI {self.low:.2f} to {self.high:.2f}"
        where = "this run" if self.same_run else f"run {self.run_id[:8]}, which shares this run's judge, generator and eval-set version"
        found = (f"kappa {'undefined' if self.kappa is None else f'{self.kappa:.2f}'} ({self.n} claims{interval}), "
                 f"reviewed {self.age(when)} on {where}")
        if state == VERIFIED:
            return f"verified: {found}; its lower bound clears the floor {floor:g}"
        short = ("kappa or its interval is undefined" if self.kappa is None or self.low is None
                 else f"its lower bound {self.low:.2f} is below the floor {floor:g}")
        return f"UNVERIFIED ({BELOW_FLOOR}): {found}; {short} (review more claims: ragexp judge review RUN_ID -n 40)"


def _parse(at: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(at or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def last_review(client, judge_key: str, run_id: str | None = None, evalset_tag: str = "") -> ReviewStatus:
    """The newest review filed under ``judge_key`` in any experiment of ``client``'s store that speaks
    for run ``run_id`` (module docstring): of that run, else of a run with its :class:`Scope`
    (``evalset_tag``: the tag holding a run's eval-set fingerprint). Without ``run_id``, or when the
    run is not in the store, no review's scope can be checked and none counts."""
    if not all(c in "0123456789abcdef" for c in judge_key) or not judge_key:
        return ReviewStatus(judge_key, why=" (the run records no judge key)")
    experiment_ids = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    runs = []
    for start in range(0, len(experiment_ids), 100):
        runs += client.search_runs(experiment_ids[start:start + 100], filter_string=f"tags.`{TAG_KEY}` = '{judge_key}'",
                                   max_results=1000)
    if not runs:
        return ReviewStatus(judge_key, why=f" in {client.tracking_uri}")
    runs.sort(key=lambda r: r.data.tags.get(TAG_AT, ""), reverse=True)
    own = next((r for r in runs if r.info.run_id == run_id), None)
    checked = _run_or_none(client, run_id) if own is None and run_id else None
    if own is None and checked is not None:
        scope = Scope.of(checked.data.params, checked.data.tags, evalset_tag)
        own = next((r for r in runs if Scope.of(r.data.params, r.data.tags, evalset_tag) == scope), None)
    if own is None:
        newest = runs[0]
        kappa = newest.data.metrics.get("judge_review/kappa")
        reason = "another generator or eval-set version" if checked is not None else (
            "a run whose generator and eval set cannot be checked (the checked run is not in the tracking store)")
        return ReviewStatus(judge_key, other=(f"judge reviewed on run {newest.info.run_id[:8]} (kappa "
                                              f"{'undefined' if kappa is None else f'{kappa:.2f}'}), {reason}"))
    metrics = own.data.metrics
    return ReviewStatus(judge_key, own.info.run_id, metrics.get("judge_review/kappa"), metrics.get("judge_review/kappa_ci_low"),
                        metrics.get("judge_review/kappa_ci_high"), int(metrics.get("judge_review/n", 0)),
                        _parse(own.data.tags.get(TAG_AT)), same_run=own.info.run_id == run_id)


def _run_or_none(client, run_id: str):
    try:
        return client.get_run(run_id)
    except Exception:  # noqa: BLE001 - a run id the store does not know: its scope cannot be checked
        return None
