"""Work timed for its cost reads and writes no cache: a served pipeline meets each query afresh.

Inside :func:`uncached`, the stage cache (:class:`~ragexp.runtime.stage_cache.StageCache`)
computes every value and stores nothing, the text-vector cache encodes queries afresh
(:class:`~ragexp.runtime.text_vectors.CachedEncoder`) and model calls are made, not read back
(:mod:`ragexp.llm.call_cache`). Passage vectors stay cached unless ``index=True``: they are the
warm index a served pipeline holds (the corpus embedded once), so a query's latency never
includes re-embedding the corpus, while a cold index build (``index=True``) does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

#: ``None``: caches in use; ``"queries"``: query-dependent work recomputed; ``"all"``: passages too.
_MODE: ContextVar[str | None] = ContextVar("ragexp_uncached", default=None)


@contextlib.contextmanager
def uncached(index: bool = False) -> Iterator[None]:
    """Bypass the caches inside the block (module docstring)."""
    token = _MODE.set("all" if index else "queries")
    try:
        yield
    finally:
        _MODE.reset(token)


def bypassing() -> bool:
    """Whether query-dependent cached work must be recomputed now."""
    return _MODE.get() is not None


def bypassing_passages() -> bool:
    """Whether passage vectors must be encoded afresh too (a cold index build)."""
    return _MODE.get() == "all"
