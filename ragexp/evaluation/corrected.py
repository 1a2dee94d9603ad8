"""A run's judge metrics corrected by human labels (PPI, :mod:`ragexp.judging.ppi`), or said to be the judge's alone.

Units and metrics (claims the judge failed on are in neither):

- ``claim_faithfulness``: the share of the run's judged claims that are supported; every claim
  weighs the same. The judge's value is ``n_supported / n_decided`` over all queries.
- ``faithfulness``: the run's headline, the mean over queries of each query's supported share;
  a claim of query ``q`` weighs ``1 / (Q * m_q)`` (``Q`` queries with faithfulness defined, ``m_q``
  decided claims in ``q``), so the weighted share of all claims is exactly the query mean.

- ``generation_failure_rate`` and ``ok_rate``: the share of answerable items with an answer whose
  class is ``generation_failure`` (``ok``); the units are those items, each weighing the same,
  the strata their class, and the labels a person's class for the whole answer
  (:mod:`ragexp.judging.answer_labels`; rows matched by query id and the answer's text).

Strata are the review's sampling design (:func:`ragexp.judging.ppi.design_strata`): the judge's
verdicts (``supported``, ``not_supported``), each split into two weight classes of ``faithfulness``
(``supported|heavy``: claims of short answers, which weigh most in the query mean;
``supported|light``) when its weights differ more than twofold; both metrics use the same strata,
each with its own weights. Claims judged against an
empty context (nothing was retrieved) are their own stratum ``empty_context``, labelled
``not_supported`` by construction (a claim cannot be supported by nothing; the review never
shows them). A human label is the labels CSV's ``human_label`` of the claim's row: id
``<run id>/<query id>#claim_<i>`` (``ragexp judge review``) or ``<query id>#claim_<i>``
(``ragexp judge sample``), used only when the row's claim and context are the run's own (a row
of another run with the same ids is not a label of this one, and is counted).

Labels of another run (``transferred``) are used only on request (``ragexp judge ppi RUN_ID
--labels-from OTHER_RUN``), only between runs of the same judge key, and only under the
assumption :func:`ragexp.judging.ppi.transferred_estimate` states (docs/ppi.md says when it holds);
the tag names the run the labels came from and the assumption.

What is logged beside the judge's value (results keys; MLflow ``generation/ppi.<m>`` and
``ci/ppi.<m>_low|high``): ``ppi.<m>``, ``ppi.<m>_ci_low``, ``ppi.<m>_ci_high``, ``ppi.<m>_judge``
(the judge's value over the same units), ``ppi.n_labels`` (claims), ``ppi.n_answer_labels``
(answers); the tag ``ragexp.ppi`` says in words
which metrics are corrected and from how many labels. A run without labels has none of these:
its judge metrics are "judge only, uncorrected" (:data:`UNCORRECTED`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.judging.answer_labels import CLASSES, AnswerLabel
from ragexp.judging.calibration.labels import NOT_SUPPORTED, SUPPORTED, LabelledClaim, label_of
from ragexp.judging.ppi import CLASS_SEPARATOR, PREFIX, PPIEstimate, Unit, design_strata, ppi_estimate, transferred_estimate
from ragexp.metrics.measure import ci_bounds

METRICS = ("faithfulness", "claim_faithfulness")
#: Metrics corrected by a person's class of whole answers, and the class each is the share of.
ANSWER_METRICS = {"generation_failure_rate": "generation_failure", "ok_rate": "ok"}
EMPTY_CONTEXT = "empty_context"
UNCORRECTED = "judge only, uncorrected"
#: A run's own labels as ``ragexp judge review`` and ``ragexp judge ppi`` log them (what ``ragexp gate`` reads).
REVIEW_ARTIFACT = "judge_review/labels.csv"
LABELS_ARTIFACT = "ppi/labels.csv"
ANSWER_LABELS_ARTIFACT = "ppi/answer_labels.csv"
TAG = "ragexp.ppi"


def claim_id(query_id: str, index: int) -> str:
    return f"{query_id}#claim_{index}"


def units_of(per_query: Sequence[QueryResult]) -> dict[str, list[Unit]]:
    """``{metric: units}`` for :data:`METRICS` (module docstring); empty lists for a run without verdicts."""
    decided = []
    for row in per_query:
        verdicts = [(i, v) for i, v in enumerate(row.claims or ()) if v.supported is not None]
        if verdicts:
            empty = not (row.judge_context or "").strip()
            decided.append((row.query_id, empty, verdicts))
    queries = len(decided)
    queries_mean: list[Unit] = []
    for query_id, empty, verdicts in decided:
        for index, verdict in verdicts:
            stratum = EMPTY_CONTEXT if empty else label_of(verdict.supported)
            queries_mean.append(Unit(claim_id(query_id, index), float(verdict.supported),
                                     1.0 / (queries * len(verdicts)), stratum))
    strata = [unit.stratum if unit.stratum == EMPTY_CONTEXT else design
              for unit, design in zip(queries_mean, design_strata(queries_mean))]
    queries_mean = [replace(unit, stratum=stratum) for unit, stratum in zip(queries_mean, strata)]
    return {"faithfulness": queries_mean, "claim_faithfulness": [replace(unit, weight=1.0) for unit in queries_mean]}


def review_strata(per_query: Sequence[QueryResult]) -> dict[str, str]:
    """``{claim id: design stratum}`` (verdict, and weight class within it) that the review and
    ``judge sample`` draw across: the strata the estimate is computed in."""
    return {unit.id: unit.stratum for unit in units_of(per_query)["faithfulness"]}


def answer_units(per_query: Sequence[QueryResult]) -> dict[str, list[Unit]]:
    """``{metric: units}`` for :data:`ANSWER_METRICS`: the answerable items with an answer, by class."""
    items = [row for row in per_query if row.answerable and row.failure_class in CLASSES]
    return {metric: [Unit(row.query_id, float(row.failure_class == cls), 1.0, row.failure_class) for row in items]
            for metric, cls in ANSWER_METRICS.items()} if items else {}


def answer_labels_for(results: RunResults, rows: Iterable[AnswerLabel], run_id: str | None = None) -> dict[str, str]:
    """``{query id: the person's class}`` from the rows that label ``results``' own answers (id, and
    the answer's text equal to the run's)."""
    run_id = run_id or results.meta.get("run_id") or ""
    answers = {row.query_id: row.answer or "" for row in results.per_query if row.answerable and row.failure_class in CLASSES}
    found = {}
    for row in rows:
        prefix, _, local = row.id.rpartition("/")
        if (prefix and prefix != run_id) or local not in answers or answers[local] != row.answer or not row.human_class:
            continue
        found[local] = row.human_class
    return found


@dataclass(frozen=True)
class RunLabels:
    """The human labels that belong to one run: ``labels`` (claim id -> 1.0 supported, 0.0 not) and
    what was left out: rows with this run's ids whose claim or context differ (``mismatched``),
    rows of other runs (``other_runs``), rows without a human label (``unlabelled``)."""

    labels: dict[str, float]
    mismatched: int = 0
    other_runs: int = 0
    unlabelled: int = 0

    def describe(self) -> str:
        parts = [f"{len(self.labels)} human labels of this run's claims"]
        if self.mismatched:
            parts.append(f"{self.mismatched} rows with this run's ids but another claim or context left out")
        if self.unlabelled:
            parts.append(f"{self.unlabelled} of its rows without a label (skipped)")
        return "; ".join(parts)


def labels_for(results: RunResults, rows: Iterable[LabelledClaim], run_id: str | None = None) -> RunLabels:
    """The rows of a labels CSV that label ``results``' claims (module docstring); ``run_id``
    defaults to the results' own ``meta.run_id``."""
    run_id = run_id or results.meta.get("run_id") or ""
    claims = {}
    for row in results.per_query:
        for index, verdict in enumerate(row.claims or ()):
            claims[claim_id(row.query_id, index)] = (verdict.claim, row.judge_context or "")
    labels: dict[str, float] = {}
    mismatched = other = unlabelled = 0
    for row in rows:
        prefix, _, local = row.id.rpartition("/")
        if prefix and prefix != run_id:
            other += 1
            continue
        if local not in claims:
            other += 1
            continue
        if claims[local] != (row.claim, row.context):
            mismatched += 1
            continue
        if row.human_label not in (SUPPORTED, NOT_SUPPORTED):
            unlabelled += 1
            continue
        labels[local] = 1.0 if row.human_label == SUPPORTED else 0.0
    return RunLabels(labels, mismatched, other, unlabelled)


def corrected(results: RunResults, labels: Mapping[str, float], confidence: float = 0.95,
              answers: Mapping[str, str] | None = None) -> dict[str, PPIEstimate]:
    """The PPI estimate of each of :data:`METRICS` the run has units for, from ``labels`` (claim
    id -> human label), and of :data:`ANSWER_METRICS` from ``answers`` (query id -> the person's
    class, :func:`answer_labels_for`); a metric none of whose units is labelled is left out."""
    out = {}
    if answers:
        for metric, units in answer_units(results.per_query).items():
            wanted = ANSWER_METRICS[metric]
            mine = {unit.id: float(answers[unit.id] == wanted) for unit in units if unit.id in answers}
            if mine:
                out[metric] = ppi_estimate(units, mine, confidence)
    return {**_claims_corrected(results, labels, confidence), **out}


def _claims_corrected(results: RunResults, labels: Mapping[str, float], confidence: float) -> dict[str, PPIEstimate]:
    by_metric = units_of(results.per_query)
    if not by_metric["claim_faithfulness"]:
        return {}
    known = {unit.id for unit in by_metric["claim_faithfulness"]}
    if not any(claim in known for claim in labels):
        return {}
    constructed = {unit.id: 0.0 for unit in by_metric["claim_faithfulness"] if unit.stratum == EMPTY_CONTEXT}
    human = sum(1 for claim in labels if claim in known and claim not in constructed)
    return {metric: replace(ppi_estimate(units, {**labels, **constructed}, confidence), n_labels=human)
            for metric, units in by_metric.items()}


def transferred(target: RunResults, source: RunResults, labels: Mapping[str, float],
                confidence: float = 0.95) -> dict[str, PPIEstimate]:
    """``target``'s metrics from the labels of ``source``'s claims (module docstring); ``{}``
    when no claim of ``source`` carries a label."""
    targets, sources = ({metric: [replace(u, stratum=u.stratum.split(CLASS_SEPARATOR, 1)[0]) for u in units]
                         for metric, units in units_of(run.per_query).items()} for run in (target, source))
    known = {unit.id for unit in sources["claim_faithfulness"]}
    if not targets["claim_faithfulness"] or not any(claim in known for claim in labels):
        return {}
    constructed = {f"target:{u.id}": 0.0 for u in targets["claim_faithfulness"] if u.stratum == EMPTY_CONTEXT}
    human = sum(1 for claim in labels if claim in known)
    out = {}
    for metric, units in targets.items():
        empty = [Unit(f"target:{u.id}", u.prediction, u.weight, u.stratum) for u in units if u.stratum == EMPTY_CONTEXT]
        out[metric] = replace(transferred_estimate(units, [*sources[metric], *empty], {**labels, **constructed}, confidence),
                              n_labels=human)
    return out


def aggregates(estimates: Mapping[str, PPIEstimate]) -> dict[str, float]:
    """The results keys logged for ``estimates`` (module docstring)."""
    out: dict[str, float] = {}
    for metric, estimate in estimates.items():
        low, high = ci_bounds(PREFIX + metric)
        out.update({PREFIX + metric: estimate.estimate, low: estimate.low, high: estimate.high,
                    f"{PREFIX}{metric}_judge": estimate.judge_mean})
    claims = [e.n_labels for metric, e in estimates.items() if metric in METRICS]
    if claims:
        out[f"{PREFIX}n_labels"] = float(max(claims))
    answers = [e.n_labels for metric, e in estimates.items() if metric in ANSWER_METRICS]
    if answers:
        out[f"{PREFIX}n_answer_labels"] = float(max(answers))
    return out


def tag_text(estimates: Mapping[str, PPIEstimate], source: str) -> str:
    """The ``ragexp.ppi`` tag: which metrics are corrected, from which labels."""
    if not estimates:
        return UNCORRECTED
    return "; ".join(f"{metric} {estimate.describe()}" for metric, estimate in estimates.items()) + f"; labels: {source}"


def from_aggregates(values: Mapping[str, float], metric: str) -> tuple[float, float, float, int] | None:
    """``(estimate, low, high, n_labels)`` of ``metric``'s PPI from a run's logged aggregates, or ``None``."""
    keys = [PREFIX + metric, *ci_bounds(PREFIX + metric)]
    if not all(key in values for key in keys):
        return None
    count = f"{PREFIX}n_answer_labels" if metric in ANSWER_METRICS else f"{PREFIX}n_labels"
    return values[keys[0]], values[keys[1]], values[keys[2]], int(values.get(count, 0))
