"""A person's judge-review verdicts as HUMAN assessments on the run's traces.

``ragexp judge review`` writes each verdict to the labels CSV and, when the review is logged to
the run, :func:`log_review_labels` puts it on the trace of the claim's query: HUMAN feedback named
like the judge's own (``claim_<i>``, :mod:`~ragexp.tracking.trace_content`) on the same
faithfulness span, value ``true`` (supported) or ``false``, so MLflow shows the judge's and the
person's verdict on one claim side by side. A changed verdict overrides the earlier HUMAN one
(``mlflow.override_feedback``: the earlier stays, marked invalid); an unchanged one is not logged
again; a skipped claim logs nothing. A run without traces gets none (its review is still logged
as metrics and ``judge_review/labels.csv``); the count of verdicts placed is returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import mlflow
from mlflow.entities import AssessmentSource, AssessmentSourceType
from mlflow.tracking import MlflowClient

from ragexp.judging.calibration.labels import NOT_SUPPORTED, SUPPORTED, LabelledClaim
from ragexp.tracking.trace_content import CLAIM_PREFIX
from ragexp.tracking.traces import trace_ids

REVIEW_SOURCE = AssessmentSource(AssessmentSourceType.HUMAN, "ragexp judge review")
#: A review row id: ``<run id>/<query id>#claim_<i>`` (:func:`ragexp.judge_review.sample.review_claims`).
ROW_ID = re.compile(r"(?P<run>[0-9a-f]{32})/(?P<query>.+)#claim_(?P<index>\d+)")
JUDGE_SPAN = "judge_faithfulness"


def log_review_labels(client: MlflowClient, run_id: str, rows: Sequence[LabelledClaim]) -> int:
    """Place the decided verdicts among ``rows`` on ``run_id``'s traces (module docstring)."""
    decided = [(match, row) for row in rows if row.human_label in (SUPPORTED, NOT_SUPPORTED)
               and (match := ROW_ID.fullmatch(row.id)) and match["run"] == run_id]
    if not decided:
        return 0
    ids = trace_ids(client, client.get_run(run_id).info.experiment_id, run_id)
    if not ids:
        return 0
    mlflow.set_tracking_uri(client.tracking_uri)  # the assessment API writes to the global store
    traces = {}
    placed = 0
    for match, row in decided:
        trace_id = ids.get(match["query"])
        if trace_id is None:
            continue
        trace = traces.get(trace_id) or traces.setdefault(trace_id, client.get_trace(trace_id, display=False))
        name = f"{CLAIM_PREFIX}{match['index']}"
        value = row.human_label == SUPPORTED
        earlier = [a for a in trace.info.assessments if a.name == name and a.valid
                   and a.source.source_type == AssessmentSourceType.HUMAN]
        if earlier and earlier[-1].value == value:
            placed += 1
            continue
        if earlier:
            mlflow.override_feedback(trace_id=trace_id, assessment_id=earlier[-1].assessment_id, value=value,
                                     rationale=row.note or None, source=REVIEW_SOURCE)
        else:
            span = next((s.span_id for s in trace.data.spans if s.name == JUDGE_SPAN), None)
            mlflow.log_feedback(trace_id=trace_id, name=name, value=value, source=REVIEW_SOURCE,
                                rationale=row.note or None, span_id=span)
        placed += 1
    return placed
