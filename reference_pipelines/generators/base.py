"""The generator protocol: a query and the retrieved chunks in, one :class:`Generation` out.

The runner gives a generator the first ``eval.context_k`` retrieved chunks (the one setting of how
many chunks reach the generator; a generator's own ``context_k`` exists for Python use only). A failed model call is recorded in :attr:`Generation.error` with an empty answer,
never raised mid-sweep and never replaced by a made-up answer, so it is counted as a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragexp.datamodel import Chunk
from ragexp.judging.correctness import is_refusal

REFUSAL_ANSWER = "I don't know based on the provided documents."
"""The exact reply a grounded generator gives when the context lacks the answer."""


@dataclass(frozen=True)
class Generation:
    """One generated answer. ``context_ids`` are the chunks the generator was shown, in order.
    ``finish_reason``, ``prefill_s`` and ``decode_s`` are the model call's
    (:class:`~ragexp.llm.base.LLMResponse`)."""

    answer: str
    prompt: str
    model_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False
    context_ids: tuple[str, ...] = field(default_factory=tuple)
    finish_reason: str | None = None
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def refused(self) -> bool:
        """Whether the answer declines to answer (:func:`ragexp.judging.correctness.is_refusal`, the one
        definition judging and failure classes use)."""
        return self.error is None and is_refusal(self.answer)

    def to_dict(self) -> dict:
        return {**asdict(self), "context_ids": list(self.context_ids)}


@runtime_checkable
class Generator(Protocol):
    """``params`` is everything that determines the answers (for cache keys and run params).
    A generator may also offer ``generate_batch(requests)``: :meth:`generate` for a list of
    ``(query, contexts)``, answered together."""

    @property
    def params(self) -> dict[str, Any]: ...

    def generate(self, query: str, contexts: Sequence[Chunk]) -> Generation: ...

