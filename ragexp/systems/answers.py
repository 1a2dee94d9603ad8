"""A black-box system's own answers, handed to the judging step as a generator would hand them.

:class:`SystemAnswers` is what :func:`ragexp.evaluation.generation_step.generation_step` calls in
place of a generator: it answers nothing itself, it returns the answer the system sent for each
eval item, in eval-set order (the order the step asks in), so faithfulness, answer relevance,
correctness and failure classes judge what the team ships, against the passages it returned.
A query the system sent no answer for is a failed generation (counted, never scored as 0 or 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SystemGeneration:
    """The fields the judging step reads from a generation (``reference_pipelines`` has the full type)."""

    answer: str
    error: str | None = None
    context_ids: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = True  # no model work of this run: left out of the generation speed
    finish_reason: str | None = None
    prefill_s: float = 0.0
    decode_s: float = 0.0


@dataclass
class SystemAnswers:
    """``answers``: ``(query, answer or None)`` per eval item, in eval-set order."""

    label: str
    answers: Sequence[tuple[str, str | None]]
    _next: int = field(default=0, init=False)

    @property
    def params(self) -> dict:
        return {"model_id": f"system:{self.label}"}

    def generate_batch(self, requests: Sequence[tuple[str, Sequence]]) -> list[SystemGeneration]:
        out = []
        for query, _ in requests:
            expected, answer = self.answers[self._next]
            if expected != query:
                raise AssertionError(f"answers asked out of eval-set order: {query!r} where {expected!r} was next")
            self._next += 1
            out.append(SystemGeneration(answer) if answer is not None
                       else SystemGeneration("", error="the system sent no answer for this query"))
        return out
