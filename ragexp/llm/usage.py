"""Tokens a block of work spent, per model: what a run's generation and judging cost.

:func:`metered` collects, while its block runs, the prompt and completion tokens of every model
call ragexp makes (:mod:`ragexp.llm.call_cache` reports each response, made or read back: a cached
call is one the configuration makes, so it counts the tokens the model reported when it was
made) and the prompt tokens a local model scores (likelihood judges: no completion). Outside a
meter nothing is recorded.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class TokenUsage:
    """``{model id: [prompt tokens, completion tokens]}``, the number of calls recorded, and the
    number of queries whose work was metered (counted by the caller, :attr:`queries`)."""

    by_model: dict[str, list[int]] = field(default_factory=dict)
    calls: int = 0
    queries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, model_id: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            counts = self.by_model.setdefault(model_id, [0, 0])
            counts[0] += int(prompt_tokens)
            counts[1] += int(completion_tokens)
            self.calls += 1

    @property
    def prompt_tokens(self) -> int:
        return sum(counts[0] for counts in self.by_model.values())

    @property
    def completion_tokens(self) -> int:
        return sum(counts[1] for counts in self.by_model.values())


_METER: ContextVar[TokenUsage | None] = ContextVar("ragexp_token_meter", default=None)


@contextlib.contextmanager
def metered(usage: TokenUsage | None = None) -> Iterator[TokenUsage]:
    """``usage`` (a fresh :class:`TokenUsage` when ``None``), which every model call inside the
    block adds to; the same usage can be metered over several blocks."""
    usage = usage if usage is not None else TokenUsage()
    token = _METER.set(usage)
    try:
        yield usage
    finally:
        _METER.reset(token)


def record(model_id: str, prompt_tokens: int, completion_tokens: int = 0) -> None:
    """Add one call's tokens to the meter listening now, if any."""
    usage = _METER.get()
    if usage is not None:
        usage.add(model_id, prompt_tokens, completion_tokens)
