"""A run's judged claims as labels-CSV rows, and the seeded sample a person reviews.

Row ids are ``<query_id>#claim_<i>`` (``i``: the claim's position in the answer); ``ragexp judge
review`` prefixes the run id (``<run_id>/<query_id>#claim_<i>``) so one labels file collects
several runs' reviews. Both ``judge sample`` and ``judge review`` draw their sample across the
judge's verdicts with :func:`ragexp.judging.ppi.draw_across` (seeded, sorted by id: claims of one
answer together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragexp.evaluation.results import QueryResult
from ragexp.judging.calibration.labels import LabelledClaim, label_of
from ragexp.judging.evidence import closest_sentence, sentence_token_sets, within_document

#: How a claim's highlighted span was found (:mod:`ragexp.judging.evidence`).
EVIDENCE_BY_JUDGE = "judge"
EVIDENCE_BY_OVERLAP = "shared words"


def judged_claims(per_query: Sequence[QueryResult], prefix: str = "") -> list[LabelledClaim]:
    """Every judged claim of a run's per-query rows as an unlabelled row (id ``<prefix><query_id>#claim_<i>``;
    claims judged against an empty context left out, as in :func:`review_claims`)."""
    return [claim.row for claim in review_claims(per_query, prefix, with_evidence=False)]


@dataclass
class ReviewClaim:
    """One claim as the review page shows it: the labels row plus the question, the answer, and
    the ``[start, end]`` of the context sentence to highlight (``evidence_by`` says whose it is)."""

    row: LabelledClaim
    query: str
    answer: str
    evidence: list[int] | None
    evidence_by: str | None

    def to_json(self) -> dict:
        row = self.row
        return {"id": row.id, "query": self.query, "answer": self.answer, "claim": row.claim, "context": row.context,
                "evidence": self.evidence, "evidence_by": self.evidence_by, "judge_label": row.judge_label,
                "judge_score": row.judge_score, "judge_raw": row.judge_raw, "human_label": row.human_label,
                "note": row.note}


def review_claims(per_query: Sequence[QueryResult], prefix: str = "", *, with_evidence: bool = True) -> list[ReviewClaim]:
    """Every judged claim of the rows, in order, except claims judged against an empty context
    (nothing retrieved: unsupported by construction, and a labels row needs a context). A verdict
    without a stored ``evidence`` (an LLM judge, or a run from before it was stored) gets the
    document sentence sharing most words with the claim, marked ``evidence_by = "shared words"``;
    so does a stored span outside the document text (a label line, as runs before labels were
    left out could store), so the page highlights document text only."""
    tokens_of = None
    if with_evidence:
        from ragexp.judging.judges import LexicalJudge

        tokens_of = LexicalJudge().content_tokens
    claims = []
    for record in per_query:
        context = record.judge_context or ""
        if not context.strip():
            continue
        sentences = None
        for index, verdict in enumerate(record.claims or ()):
            row = LabelledClaim(
                id=f"{prefix}{record.query_id}#claim_{index}",
                context=context,
                claim=verdict.claim,
                note=verdict.error or "",
                judge_label=label_of(verdict.supported),
                judge_score="" if verdict.score is None else f"{verdict.score:.6g}",
                judge_raw=verdict.raw,
            )
            evidence, by = verdict.evidence, EVIDENCE_BY_JUDGE
            if tokens_of is not None and (evidence is None or not within_document(context, evidence)):
                sentences = sentences if sentences is not None else sentence_token_sets(context, tokens_of)
                evidence, by = closest_sentence(tokens_of(row.claim), sentences), EVIDENCE_BY_OVERLAP
            claims.append(ReviewClaim(row, record.query, record.answer or "", evidence,
                                      by if evidence is not None else None))
    return claims
