"""Generation scoring: faithfulness by claims, answer relevance, correctness, failure classes,
and the calibration of judges against human labels (see docs/judging.md).

Modules: :mod:`~ragexp.judging.claims` (answer -> claims), :mod:`~ragexp.judging.faithfulness`,
:mod:`~ragexp.judging.answer_relevance`, :mod:`~ragexp.judging.correctness` (SQuAD EM/F1, key
facts, refusals), :mod:`~ragexp.judging.judges` (LLM, local-likelihood, embedding and lexical
judges), :mod:`~ragexp.judging.failure`, :mod:`~ragexp.judging.calibration.labels` (labels CSV,
agreement), :mod:`~ragexp.judging.calibration.threshold` (threshold fit and grouped cross-validation),
:mod:`~ragexp.judging.calibration.record` (the calibration file a judge and a run use),
:mod:`~ragexp.judging.calibration.kappa_interval` (kappa's confidence interval),
:mod:`~ragexp.judging.evidence` (the context sentence a verdict rests on), :mod:`~ragexp.judging.ppi`
(a judge metric corrected by a labelled sample), :mod:`~ragexp.judging.review_status` (was the judge
checked by a person). A run's corrected judge metrics are :mod:`ragexp.evaluation.corrected`; the
review page (``ragexp judge review``) is :mod:`ragexp.judge_review`.
"""

from ragexp.judging.answer_relevance import (
    AnswerRelevanceResult,
    aggregate_answer_relevance,
    answer_relevance,
)
from ragexp.judging.correctness import correctness_metrics, is_refusal
from ragexp.judging.failure import (
    FailureClass,
    FailureThresholds,
    classify,
    failure_rates,
    gold_in_context,
)
from ragexp.judging.faithfulness import (
    FAITHFULNESS_PROMPT,
    FaithfulnessResult,
    Verdict,
    aggregate_faithfulness,
    faithfulness,
)
from ragexp.judging.judges import (
    EmbeddingJudge,
    LexicalJudge,
    LLMJudge,
    LocalLikelihoodJudge,
    warn_if_self_judging,
)

__all__ = [
    "FAITHFULNESS_PROMPT",
    "AnswerRelevanceResult",
    "EmbeddingJudge",
    "FailureClass",
    "FailureThresholds",
    "FaithfulnessResult",
    "LLMJudge",
    "LexicalJudge",
    "LocalLikelihoodJudge",
    "Verdict",
    "aggregate_answer_relevance",
    "aggregate_faithfulness",
    "answer_relevance",
    "classify",
    "correctness_metrics",
    "failure_rates",
    "faithfulness",
    "gold_in_context",
    "is_refusal",
    "warn_if_self_judging",
]
