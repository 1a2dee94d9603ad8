"""Was the judge checked by a person? The last human review of a judge, and whether it clears the floor.

A judge is named by its :func:`~ragexp.judging.calibration.record.judge_key` (model with its
weights hash, prompt, threshold). ``ragexp judge review`` files each agreement it logs under the
reviewed run's key: tags :data:`TAG_KEY` and :data:`TAG_AT` (UTC, ISO 8601) on that run, next to
``judge_review/kappa`` and its interval. :func:`last_review` finds the newest such review in any
experiment of the store: a review of one run speaks for every run of the same judge, since what
it measured is the judge, and a change of model, prompt or threshold makes a new key that no
review speaks for yet.

A judge metric (:data:`JUDGE_METRICS`, also per tag or source, or its PPI estimate) is
*verified* when that review's kappa is at least the floor (:data:`~ragexp.judging.calibration.record.MIN_KAPPA`
unless configured), and *unverified* when the judge was never reviewed, or its kappa is below the
floor or undefined.
"""

from __future__ import annotations

import datetime as dt
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


@dataclass(frozen=True)
class ReviewStatus:
    """The newest review of judge ``judge_key`` (``run_id`` ``None``: never reviewed, ``why`` says
    where it was looked for)."""

    judge_key: str
    run_id: str | None = None
    kappa: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    at: dt.datetime | None = None
    why: str = ""

    def verified(self, floor: float) -> bool:
        return self.run_id is not None and self.kappa is not None and self.kappa >= floor

    def age(self, when: dt.datetime | None = None) -> str:
        if self.at is None:
            return "unknown age"
        days = ((when or now()) - self.at).total_seconds() / 86400
        return "today" if days < 1 else f"{days:.0f} days ago"

    def describe(self, floor: float, when: dt.datetime | None = None) -> str:
        """One sentence: ``verified: kappa 0.62 (95% CI 0.31 to 0.93, 20 claims), reviewed today on run 0123abcd``
        or ``UNVERIFIED: never reviewed ...`` / ``UNVERIFIED: kappa 0.21 is below the floor 0.4 ...``."""
        if self.run_id is None:
            return (f"UNVERIFIED: judge {self.judge_key} was never reviewed{self.why} (ragexp judge review RUN_ID: "
                    "a person checks 20 of its verdicts)")
        interval = "" if self.low is None else f", 95% CI {self.low:.2f} to {self.high:.2f}"
        found = (f"kappa {'undefined' if self.kappa is None else f'{self.kappa:.2f}'} ({self.n} claims{interval}), "
                 f"reviewed {self.age(when)} on run {self.run_id[:8]}")
        if self.verified(floor):
            return f"verified: {found}"
        return f"UNVERIFIED: {found}; below the floor {floor:g}"


def _parse(at: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(at or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def last_review(client, judge_key: str) -> ReviewStatus:
    """The newest review filed under ``judge_key`` in any experiment of ``client``'s store."""
    if not all(c in "0123456789abcdef" for c in judge_key) or not judge_key:
        return ReviewStatus(judge_key, why=" (the run records no judge key)")
    experiment_ids = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    runs = []
    for start in range(0, len(experiment_ids), 100):
        runs += client.search_runs(experiment_ids[start:start + 100], filter_string=f"tags.`{TAG_KEY}` = '{judge_key}'",
                                   max_results=1000)
    if not runs:
        return ReviewStatus(judge_key, why=f" in {client.tracking_uri}")
    run = max(runs, key=lambda r: r.data.tags.get(TAG_AT, ""))
    metrics = run.data.metrics
    return ReviewStatus(judge_key, run.info.run_id, metrics.get("judge_review/kappa"), metrics.get("judge_review/kappa_ci_low"),
                        metrics.get("judge_review/kappa_ci_high"), int(metrics.get("judge_review/n", 0)),
                        _parse(run.data.tags.get(TAG_AT)))
