"""The contracts every language model in ragexp meets.

A :class:`ChatModel` turns a prompt (plain text or OpenAI-style chat messages) into an
:class:`LLMResponse`. A :class:`ScoringModel` (local models only) returns log-probabilities of a
continuation, used by judges that score by likelihood. A failed call raises
:class:`LLMCallError` with a ``kind`` — callers count these failures, they never turn them into
a default answer or score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal, Protocol, runtime_checkable

Prompt = str | list[dict]
"""A prompt: plain text (sent as one user message) or a list of ``{"role", "content"}`` messages."""

FailureKind = Literal["timeout", "http_4xx", "http_5xx", "connection", "malformed", "input_too_long"]
FAILURE_KINDS: tuple[str, ...] = ("timeout", "http_4xx", "http_5xx", "connection", "malformed", "input_too_long")
"""``input_too_long``: a local model's context window cannot hold the prompt (an HTTP endpoint
reports the same as ``http_4xx``)."""


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """One completion. ``cached`` is True when it was served from a :class:`CallCache` without
    calling the model; ``latency_s`` is then the latency of the original call.

    ``finish_reason``: ``eos`` (the model ended its turn), ``stop`` (a stop string; HTTP
    endpoints say ``stop`` for either), ``length`` (``max_tokens`` reached), ``repetition`` (a
    local model with ``repeat_ngram`` found the answer repeating itself and kept the text before
    it: :mod:`ragexp.llm.answer_end`), ``degenerate`` (the same, where the answer turned into list
    markers or one token over and over), or ``None`` when unknown. ``prefill_s`` / ``decode_s`` (local models,
    uncached calls; 0 otherwise) split the model time into the pass over the prompt, which also
    yields the first new token, and the passes that make the other ``completion_tokens - 1``.
    A call answered in a batch carries its share of the batch's time: prefill in proportion to
    its prompt tokens, decode to its decode tokens, so sums over calls are wall times."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    model: str
    latency_s: float
    finish_reason: str | None = None
    prefill_s: float = 0.0
    decode_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class LLMCallError(Exception):
    """A model call that failed for good: retries exhausted, a non-retryable HTTP status, or a
    malformed response. ``kind`` is one of :data:`FAILURE_KINDS`; ``attempts`` counts the
    requests made (1 = no retry)."""

    def __init__(self, kind: FailureKind, message: str, *, attempts: int = 1, status: int | None = None) -> None:
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown LLM failure kind {kind!r}")
        self.kind = kind
        self.attempts = attempts
        self.status = status
        super().__init__(f"{kind} after {attempts} attempt(s): {message}")


@runtime_checkable
class ChatModel(Protocol):
    """Anything that completes prompts. ``model_id`` is the model's identity for caches and for
    self-preference checks (a judge should not be the model that generated the answer)."""

    model_id: str

    def complete(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> LLMResponse:
        """Complete ``prompt``; raise :class:`LLMCallError` when the call fails."""


def complete_all(
    model: ChatModel,
    prompts: Sequence[Prompt],
    *,
    max_tokens: int = 256,
    temperature: float = 0.0,
    stop: list[str] | None = None,
) -> list[LLMResponse | LLMCallError]:
    """Complete every prompt: in batches through ``model.complete_batch`` when the model has
    one (local models), else one :meth:`ChatModel.complete` call per prompt (HTTP endpoints).
    A failed call is returned in its place as the :class:`LLMCallError`, never raised, so one
    bad prompt does not fail the others."""
    complete_batch = getattr(model, "complete_batch", None)
    if complete_batch is not None:
        return complete_batch(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop)
    results: list[LLMResponse | LLMCallError] = []
    for prompt in prompts:
        try:
            results.append(model.complete(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop))
        except LLMCallError as err:
            results.append(err)
    return results


def refused_by_endpoint(results: Sequence[LLMResponse | LLMCallError]) -> LLMCallError | None:
    """The error when the endpoint refused every one of ``results`` (each an ``http_4xx``, made
    once: a 4xx is not retried) with one status, else ``None``: a wrong model name, path or key,
    which every further call would meet as well, so the caller stops with that one line
    instead of recording the same failure for every question."""
    errors = [r for r in results if isinstance(r, LLMCallError)]
    if not results or len(errors) < len(results) or any(e.kind != "http_4xx" or e.status == 429 for e in errors):
        return None
    return errors[0] if len({e.status for e in errors}) == 1 else None


@runtime_checkable
class ScoringModel(Protocol):
    """A model that exposes token log-probabilities (local models only)."""

    model_id: str

    def logprob(self, prefix: str, continuation: str) -> float:
        """``sum_t log p(continuation_t | prefix, continuation_<t)`` in nats."""

    def logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """:meth:`logprob` for each ``(prefix, continuation)`` pair, batched."""


def as_messages(prompt: Prompt) -> list[dict]:
    """Normalise a prompt to chat messages: a string becomes one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]
