"""One review of a run's judge: the sampled claims, the person's verdicts, the agreement.

Verdicts go to the labels CSV at once (:mod:`ragexp.judging.calibration.labels` format, the one
``ragexp judge calibrate`` and ``ragexp judge agreement`` read): a claim's row is added, or
replaced when the person changes their mind (one row per id); *skip* writes the row with an empty
``human_label`` and ``note: skipped`` (an unreviewed row to the readers). Rows of other runs or
files already in the CSV are kept; a claim already labelled there opens labelled.

A verdict is a compare-and-set on that claim's row, decided by the file's content alone (nothing
in server memory, so a restarted server decides the same): the page sends ``label`` (the new
verdict) and ``before`` (the verdict it showed: ``supported``, ``not_supported``, ``skip`` or
``""`` for none). The file holds ``before``: the row is written (the whole file replaced
atomically); it holds ``label`` already: nothing is written and the reply says so (the retry of a
save whose reply was lost: the server was killed after writing, or failed with a 5xx); anything
else: :class:`~ragexp.web.edit_session.Conflict` (HTTP 409: another page, an editor or another server
gave that claim another verdict) and nothing is written. Verdicts on other claims never conflict,
so two pages reviewing different claims of one file both land. The file is read, compared and
written under an :class:`~ragexp.web.edit_session.EditLock` on ``<labels>.lock`` shared with every other
process on the same file, and every reply and page load shows the file's verdicts.

Agreement is computed over the sampled claims the person labelled (skips left out):
accuracy and Cohen's kappa with its 95 % percentile-bootstrap interval
(:func:`ragexp.judging.calibration.kappa_interval.bootstrap_kappa_interval`).
The sample is drawn across the judge's verdicts and, within a verdict, its weight classes
(:func:`ragexp.judging.ppi.draw_across`); given the run's count of claims per such stratum
(``verdict_counts``), each labelled claim weighs its stratum's count over the labelled claims of
that stratum, so kappa estimates the agreement over
all the run's claims, not over the balanced sample (the PPI estimate weighs the verdicts the same
way). Once every sampled claim has a verdict or a skip, and after every later change, it is logged to the
run: metrics ``judge_review/{n, accuracy, kappa, kappa_ci_low, kappa_ci_high, skipped, sampled}``
(an undefined kappa or interval is left out), the reviewed rows as the artifact
``judge_review/labels.csv`` and the printed report as ``judge_review/agreement.txt``, tags
``judge_review.seed`` and ``judge_review.labels_file`` (tags, not params: a later review may use
another seed or file), and, given the run's ``results`` and ``judge_key``: the PPI estimates of its
faithfulness from these labels (:mod:`ragexp.evaluation.corrected`: ``ppi.*`` metrics, tag
``ragexp.ppi``) and the review's filing under the judge (:mod:`ragexp.judging.review_status`:
tags ``ragexp.judge_review.judge_key``, ``ragexp.judge_review.at``); each verdict also goes as HUMAN
feedback on the claim's trace when the run has traces (:mod:`ragexp.tracking.review_assessments`).
The page also shows, per metric, how many labels would narrow the PPI interval to each width of
:data:`PLAN_WIDTHS` (:func:`ragexp.judging.ppi.labels_needed`). A failed log leaves the verdict
saved and is shown on the page; the next change retries it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.evaluation import corrected
from ragexp.evaluation.results import RunResults
from ragexp.judge_review.sample import ReviewClaim
from ragexp.judging.calibration.kappa_interval import KappaInterval, bootstrap_kappa_interval
from ragexp.judging.calibration.labels import (
    LABELS,
    AgreementReport,
    LabelledClaim,
    agreement,
    labels_csv,
    read_labels,
)
from ragexp.judging.ppi import labels_needed
from ragexp.judging.review_status import TAG_AT, TAG_KEY, now, timestamp
from ragexp.tracking import store
from ragexp.tracking.metric_names import to_mlflow
from ragexp.tracking.review_assessments import log_review_labels
from ragexp.web.edit_session import Conflict, EditLock, atomic_write, compare_and_set

SKIP = "skip"
SKIPPED_NOTE = "skipped"
UNDECIDED = ""
PREFIX = "judge_review/"
#: Interval widths the page plans labels for.
PLAN_WIDTHS = (0.05, 0.1, 0.15, 0.2)
#: How a verdict is named in a conflict message.
NAMES = {"supported": "supported", "not_supported": "not supported", SKIP: "skipped", UNDECIDED: "no verdict"}


def verdict_of(row: LabelledClaim) -> str:
    """The page's verdict a labels row holds: its ``human_label``, ``skip`` or ``""`` (undecided)."""
    return row.human_label or (SKIP if row.note == SKIPPED_NOTE else UNDECIDED)


@dataclass(frozen=True)
class ReviewAgreement:
    report: AgreementReport
    interval: KappaInterval
    sampled: int
    skipped: int
    weighted: bool = False  # kappa weighted back to the run's verdicts (module docstring)

    def metrics(self) -> dict[str, float]:
        """What is logged to the run (undefined values left out)."""
        out = {"n": float(self.report.n), "sampled": float(self.sampled), "skipped": float(self.skipped)}
        if self.report.accuracy is not None:
            out["accuracy"] = self.report.accuracy
        if self.interval.kappa is not None:
            out["kappa"] = self.interval.kappa
        if self.interval.low is not None:
            out.update(kappa_ci_low=self.interval.low, kappa_ci_high=self.interval.high)
        return {PREFIX + key: value for key, value in out.items()}

    def render(self) -> str:
        ci = self.interval
        kappa = ("undefined" if ci.kappa is None else f"{ci.kappa:.3f} (no interval: one side used a single label)"
                 if ci.low is None else f"{ci.kappa:.3f} (95% CI {ci.low:.3f} to {ci.high:.3f})")
        which = "weighted to the run's verdict counts, " if self.weighted else ""
        return (f"sampled {self.sampled}, skipped {self.skipped}\n{self.report.render()}\n"
                f"Cohen's kappa, {which}with its interval: {kappa}")

    def to_json(self) -> dict:
        return {"n": self.report.n, "accuracy": self.report.accuracy, "kappa": self.interval.kappa,
                "kappa_ci_low": self.interval.low, "kappa_ci_high": self.interval.high,
                "sampled": self.sampled, "skipped": self.skipped, "confusion": self.report.confusion}


def review_agreement(rows: list[LabelledClaim], verdict_counts: dict[str, int] | None = None,
                     stratum_of: Callable[[LabelledClaim], str] = lambda row: row.judge_label) -> ReviewAgreement:
    """Agreement of the rows' ``human_label`` with their ``judge_label``; kappa weighted by
    ``verdict_counts`` (the run's claims per sampling stratum, ``stratum_of`` a row's: its verdict,
    or its design stratum of verdict and weight class) when given (module docstring)."""
    report = agreement(rows)
    compared = [row for row in rows if row.human_label and row.judge_label]
    weights = None
    if verdict_counts:
        labelled = Counter(stratum_of(row) for row in compared)
        weights = [verdict_counts.get(stratum_of(row), 0) / labelled[stratum_of(row)] for row in compared]
    interval = bootstrap_kappa_interval([row.human_label for row in compared], [row.judge_label for row in compared],
                                        weights=weights)
    skipped = sum(1 for row in rows if not row.human_label and row.note == SKIPPED_NOTE)
    return ReviewAgreement(report, interval, len(rows), skipped, weights is not None)


def read_existing(path: Path) -> list[LabelledClaim]:
    """The labels file's rows (none when it does not exist yet); a malformed file is bad input."""
    if not path.exists():
        return []
    try:
        return read_labels(path)
    except RagexpInputError as err:
        raise RagexpInputError(err.message, file=err.file, line=err.line, field=err.field or "--labels") from None


Logger = Callable[[dict[str, float], dict[str, str], dict[str, str]], None]
"""``log(metrics, tags, artifacts)``: write to the run; ``artifacts`` maps path -> text."""


class ReviewSession:
    """The state behind the review page; every method is safe to call from several requests."""

    def __init__(self, *, run_id: str, run_name: str, claims: list[ReviewClaim], labels_path: Path, seed: int,
                 total_claims: int, log: Logger, verdict_counts: dict[str, int] | None = None,
                 results: RunResults | None = None, judge_key: str | None = None) -> None:
        self.run_id, self.run_name, self.seed, self.total_claims = run_id, run_name, seed, total_claims
        self.verdict_counts, self.results, self.judge_key = verdict_counts, results, judge_key
        self._strata: dict[str, str] | None = None
        self.claims = claims
        self.path = Path(labels_path)
        self.lock = EditLock(self.path)
        self.log = log
        self.logged: dict | None = None
        self.log_error: str | None = None  # why the last log to the run failed (the store unreachable ...)
        self._from_run = {claim.row.id: claim.row for claim in claims}  # the rows before any verdict
        self._read()  # one file replaced by renames: read whole without the lock

    def _read(self) -> list[LabelledClaim]:
        """The labels file's rows; each sampled claim takes its verdict from there (hold :attr:`lock`
        when other requests may run)."""
        rows = read_existing(self.path)
        stored = {row.id: row for row in rows}
        for claim in self.claims:
            original = self._from_run[claim.row.id]
            saved = stored.get(claim.row.id)
            claim.row = original if saved is None else replace(original, human_label=saved.human_label, note=saved.note)
        return rows

    def decided(self, claim: ReviewClaim) -> bool:
        return verdict_of(claim.row) != UNDECIDED

    def state(self) -> dict:
        """What the page loads: the run, the claims with the file's verdicts, the labels file, the agreement."""
        with self.lock:
            self._read()
            return {"run": {"id": self.run_id, "name": self.run_name, "judged_claims": self.total_claims,
                            "seed": self.seed},
                    "labels_file": str(self.path), "claims": [claim.to_json() for claim in self.claims],
                    **self._summary()}

    def _summary(self) -> dict:
        rows = [c.row for c in self.claims]
        return {"agreement": review_agreement(rows, self.verdict_counts, self._stratum_of).to_json(), "logged": self.logged,
                "log_error": self.log_error, "done": all(self.decided(c) for c in self.claims),
                "ppi": {metric: {"judge": e.judge_mean, "estimate": e.estimate, "low": e.low, "high": e.high,
                                 "n_labels": e.n_labels, "n_units": e.n_units,
                                 "labels_needed": {f"{w:g}": labels_needed(e, w) for w in PLAN_WIDTHS}}
                        for metric, e in self._corrected(rows).items()}}

    def _stratum_of(self, row: LabelledClaim) -> str:
        """The row's sampling stratum: its design stratum in the run (verdict and weight class), or its verdict."""
        if self.results is None:
            return row.judge_label
        if self._strata is None:
            self._strata = corrected.review_strata(self.results.per_query)
        return self._strata.get(row.id.rpartition("/")[2], row.judge_label)

    def _corrected(self, rows: list[LabelledClaim]) -> dict:
        """The PPI estimates of the run's faithfulness from this review's labels ({} without the run's results)."""
        if self.results is None:
            return {}
        return corrected.corrected(self.results, corrected.labels_for(self.results, rows, self.run_id).labels)

    def label(self, claim_id: str, label: str, before: str) -> dict:
        """Record ``label`` (``supported``, ``not_supported`` or ``skip``) for one sampled claim whose
        verdict the page showed as ``before`` (module docstring); returns the agreement, what was
        logged and ``already_so`` (nothing written). Raises :class:`~ragexp.web.edit_session.Conflict`
        when the file gives the claim another verdict than ``before``."""
        if label not in (*LABELS, SKIP):
            raise ValueError(f"label must be one of {', '.join((*LABELS, SKIP))}, got {label!r}")
        if before not in (*LABELS, SKIP, UNDECIDED):
            raise ValueError(f"before (the verdict the page showed) must be one of {', '.join((*LABELS, SKIP))} or "
                             f"empty, got {before!r}")
        claim = next((c for c in self.claims if c.row.id == claim_id), None)
        if claim is None:
            raise KeyError(claim_id)
        with self.lock:
            rows = self._read()
            stored = verdict_of(claim.row)
            try:
                already_so = not compare_and_set(
                    self.path, claim_id, {"label": stored}, {"label": label}, {"label": before},
                    message=f"{claim_id} was marked {NAMES[stored]} elsewhere (another page, editor or process) since "
                            f"this page showed {NAMES[before]}; nothing was written")
            except Conflict as conflict:
                conflict.before = stored  # this page's "before" is the verdict itself: sent again, it keeps the page's
                raise
            if not already_so:
                row = replace(claim.row, human_label="" if label == SKIP else label,
                              note=SKIPPED_NOTE if label == SKIP else "")
                at = next((i for i, existing in enumerate(rows) if existing.id == row.id), None)
                if at is None:
                    rows.append(row)
                else:
                    rows[at] = row
                atomic_write(self.path, labels_csv(rows))
                claim.row = row
            if all(self.decided(c) for c in self.claims) and (not already_so or self.logged is None or self.log_error):
                try:
                    self._log()
                    self.log_error = None
                except Exception as err:  # noqa: BLE001 - the verdict is saved; the page says the log failed
                    self.log_error = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
            return {"already_so": already_so, **self._summary(),
                    "verdicts": {c.row.id: verdict_of(c.row) for c in self.claims}}

    def _log(self) -> None:
        rows = [c.row for c in self.claims]
        result = review_agreement(rows, self.verdict_counts, self._stratum_of)
        metrics = result.metrics()
        at = timestamp(now())
        tags = {"judge_review.seed": str(self.seed), "judge_review.labels_file": str(self.path)}
        if self.judge_key is not None:
            tags.update({TAG_KEY: self.judge_key, TAG_AT: at})
        if self.results is not None:
            estimates = self._corrected(rows)
            metrics.update({to_mlflow(key): value for key, value in corrected.aggregates(estimates).items()})
            tags[corrected.TAG] = corrected.tag_text(estimates, f"judge review of this run ({self.path.name}, seed {self.seed})")
        self.log(metrics, tags,
                 {PREFIX + "labels.csv": labels_csv(rows), PREFIX + "agreement.txt": result.render() + "\n"})
        self.logged = {"at": at, "metrics": metrics}


def mlflow_logger(client, run_id: str, reviewed: Callable[[], list[LabelledClaim]] | None = None) -> Logger:
    """A :data:`Logger` writing to ``run_id`` through ``client`` (each metric appended to its history);
    ``reviewed()``: the reviewed rows, whose verdicts also go on the run's traces as HUMAN feedback
    (:mod:`ragexp.tracking.review_assessments`)."""
    def log(metrics: dict[str, float], tags: dict[str, str], artifacts: dict[str, str]) -> None:
        store.log_batched(client, run_id, metrics=metrics, tags=tags)
        for path, text in artifacts.items():
            store.log_artifact_text(client, run_id, path, text)
        if reviewed is not None:
            log_review_labels(client, run_id, reviewed())

    return log
