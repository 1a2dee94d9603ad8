"""Answer relevance: does the answer respond to what was asked (the method article's check)?

Definition
----------
The judge writes the question the answer responds to (:data:`QUESTION_PROMPT`, greedy decoding);
the run's embedding model encodes that generated question ``g`` and the original query ``q``::

    answer_relevance = cos(e(q), e(g)) = e(q)·e(g) / (|e(q)| |e(g)|)

The generated question is kept with the score so a reader can see why a score is low.

Undefined (``score is None``, reported as absent and counted) when:

- the answer is empty or a refusal (``no_answer``) — there is no answer to be relevant; refusals
  are scored by the failure classes instead;
- the judge cannot generate questions (``judge_cannot_generate``): the lexical judge;
- the generation call failed after retries or produced no text (``judge_failure``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from ragexp.judging.correctness import is_refusal
from ragexp.llm.base import LLMCallError

QUESTION_PROMPT = """Here is an answer given by an assistant.

Answer: {answer}

Write the single question that this answer responds to. Reply with the question only.
Question:"""

Encoder = Callable[[Sequence[str]], np.ndarray]
"""``encode(texts) -> array (len(texts), dim)``: the run's embedding model."""


class QuestionWriter(Protocol):
    model_id: str

    def generate_question(self, answer: str) -> str | None:
        """The question ``answer`` responds to; ``None`` if this judge cannot generate text.
        Raises :class:`ragexp.llm.LLMCallError` when the model call fails."""


@dataclass(frozen=True, slots=True)
class AnswerRelevanceResult:
    score: float | None
    generated_question: str | None = None
    undefined_reason: str | None = None
    error: str | None = None

    def to_record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "score" and v is not None}


def clean_generated_question(text: str) -> str:
    """First non-empty line of the model's output, without a leading ``Question:`` label."""
    for line in text.splitlines():
        line = line.strip()
        if line.lower().startswith("question:"):
            line = line[len("question:") :].strip()
        if line:
            return line
    return ""


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / norm) if norm else 0.0


def answer_relevance(query: str, answer: str, judge: QuestionWriter, encode: Encoder) -> AnswerRelevanceResult:
    """Score one answer (see the module docstring)."""
    if is_refusal(answer):
        return AnswerRelevanceResult(score=None, undefined_reason="no_answer")
    try:
        generated = judge.generate_question(answer)
    except LLMCallError as err:
        return AnswerRelevanceResult(score=None, undefined_reason="judge_failure", error=str(err))
    if generated is None:
        return AnswerRelevanceResult(score=None, undefined_reason="judge_cannot_generate")
    if not generated.strip():
        return AnswerRelevanceResult(score=None, undefined_reason="judge_failure", error="empty generated question")
    vectors = np.asarray(encode([query, generated]), dtype=np.float64)
    return AnswerRelevanceResult(score=cosine(vectors[0], vectors[1]), generated_question=generated)


def aggregate_answer_relevance(results: Iterable[AnswerRelevanceResult]) -> dict[str, float]:
    """Mean over defined scores (absent if none) and counts of each undefined reason."""
    results = list(results)
    scores = [r.score for r in results if r.score is not None]
    out = {
        "n_answer_relevance_scored": float(len(scores)),
        "answer_relevance_judge_failures": float(sum(r.undefined_reason == "judge_failure" for r in results)),
    }
    if scores:
        out["answer_relevance"] = sum(scores) / len(scores)
    return out
