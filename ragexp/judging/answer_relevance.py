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
from ragexp.llm.base import ChatModel, LLMCallError, complete_all

QUESTION_PROMPT = """Here is an answer given by an assistant.

Answer: {answer}

Write the single question that this answer responds to. Reply with the question only.
Question:"""

Encoder = Callable[[Sequence[str]], np.ndarray]
"""``encode(texts) -> array (len(texts), dim)``: the run's embedding model."""


class QuestionWriter(Protocol):
    """A judge that writes questions. It may also offer ``generate_questions(answers)``: the
    same for many answers at once, a failed call returned in its place as the
    :class:`~ragexp.llm.LLMCallError`."""

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


def generate_questions(model: ChatModel, answers: Sequence[str], template: str = QUESTION_PROMPT) -> list[str | LLMCallError]:
    """The question each answer responds to: ``template`` filled with the answer, greedy, at
    most 64 tokens, stopped at a blank line, cleaned by :func:`clean_generated_question`. The
    prompts go to the model together (:func:`~ragexp.llm.base.complete_all`)."""
    prompts = [template.format(answer=answer) for answer in answers]
    responses = complete_all(model, prompts, max_tokens=64, temperature=0.0, stop=["\n\n"])
    return [r if isinstance(r, LLMCallError) else clean_generated_question(r.text) for r in responses]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / norm) if norm else 0.0


def answer_relevance(query: str, answer: str, judge: QuestionWriter, encode: Encoder) -> AnswerRelevanceResult:
    """Score one answer (see the module docstring)."""
    return answer_relevance_batch([query], [answer], judge, encode)[0]


def _questions(judge: QuestionWriter, answers: list[str]) -> list[str | None | LLMCallError]:
    """The judge's questions for ``answers``: in one batch where it offers one."""
    batch = getattr(judge, "generate_questions", None)
    if batch is not None:
        return batch(answers)
    questions: list[str | None | LLMCallError] = []
    for answer in answers:
        try:
            questions.append(judge.generate_question(answer))
        except LLMCallError as err:
            questions.append(err)
    return questions


def answer_relevance_batch(
    queries: Sequence[str], answers: Sequence[str], judge: QuestionWriter, encode: Encoder
) -> list[AnswerRelevanceResult]:
    """:func:`answer_relevance` for each ``(query, answer)``: questions written in one batch,
    queries and questions encoded in one call."""
    results: list[AnswerRelevanceResult | None] = [
        AnswerRelevanceResult(score=None, undefined_reason="no_answer") if is_refusal(answer) else None for answer in answers
    ]
    todo = [i for i, result in enumerate(results) if result is None]
    generated: dict[int, str] = {}
    for i, question in zip(todo, _questions(judge, [answers[i] for i in todo]) if todo else []):
        if isinstance(question, LLMCallError):
            results[i] = AnswerRelevanceResult(score=None, undefined_reason="judge_failure", error=str(question))
        elif question is None:
            results[i] = AnswerRelevanceResult(score=None, undefined_reason="judge_cannot_generate")
        elif not question.strip():
            results[i] = AnswerRelevanceResult(score=None, undefined_reason="judge_failure", error="empty generated question")
        else:
            generated[i] = question
    if generated:
        order = sorted(generated)
        vectors = np.asarray(encode([text for i in order for text in (queries[i], generated[i])]), dtype=np.float64)
        for row, i in enumerate(order):
            score = cosine(vectors[2 * row], vectors[2 * row + 1])
            results[i] = AnswerRelevanceResult(score=score, generated_question=generated[i])
    return results


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
