"""Wall time per pipeline stage, reported by the components themselves while a clock listens.

A component marks the part of its work that is one stage of a served pipeline::

    with stage(QUERY_ENCODING):
        vectors = encoder.encode_queries(queries)

Outside :func:`listening` a mark costs one context-variable lookup and records nothing; inside,
the block's wall time (``time.perf_counter``) is added to the clock under the stage's name.
Nested marks of the same stage count once (the outer one): a hybrid retriever's dense component
marks its query encoding, and the hybrid marks its fusion, so the caller measuring one query can
split ``search`` into ``query_encoding + search + fusion`` without knowing the components.
A component that marks nothing is timed whole by its caller (:mod:`ragexp.cost.latency`).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator
from contextvars import ContextVar

QUERY_ENCODING = "query_encoding"
SEARCH = "search"
FUSION = "fusion"
RERANK = "rerank"
GENERATION = "generation"
JUDGING = "judging"
#: The stages of a served query, in pipeline order; judging is evaluation work, never part of serving.
SERVED_STAGES = (QUERY_ENCODING, SEARCH, FUSION, RERANK, GENERATION)
STAGES = (*SERVED_STAGES, JUDGING)


class StageClock:
    """Seconds per stage name, summed over the marked blocks while listening."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._open: set[str] = set()


_CLOCK: ContextVar[StageClock | None] = ContextVar("ragexp_stage_clock", default=None)


@contextlib.contextmanager
def listening() -> Iterator[StageClock]:
    """A fresh clock that the marks inside the block report to."""
    clock = StageClock()
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark the block as stage ``name`` (module docstring)."""
    clock = _CLOCK.get()
    if clock is None or name in clock._open:
        yield
        return
    clock._open.add(name)
    started = time.perf_counter()
    try:
        yield
    finally:
        clock.seconds[name] += time.perf_counter() - started
        clock._open.discard(name)
