"""An index's build time and size: how long a run's retriever took to hold its index, whether it
built it or read it back from the stage cache, and how many bytes it holds.

:func:`timed_index` builds (or loads) the index of ``retriever`` over the run's chunks and says
which: ``cold`` when nothing index-related came from a cache (no stage-cache hit on ``embeddings``,
``bm25-index``, ``faiss-index``, no passage vector read from the text-vector store), so its
seconds are a build; else its seconds are a load and not a build time. Inside
:func:`ragexp.runtime.uncached.uncached` with ``index=True`` every build is cold
(``cost.index_rebuild``).

:func:`footprint` asks the retriever for ``index_footprint()`` (a component's own bytes by kind:
``vectors_bytes``, ``faiss_bytes``, ``bm25_bytes``; the hybrid sums its components'); a
retriever without one has no size (a user's pipeline: not guessed). ``index_bytes`` is the index
as stored: FAISS codes plus graph or lists, BM25's CSR arrays and vocabulary; a flat FAISS index
holds the vectors, so its ``faiss_bytes`` equal ``vectors_bytes`` and they are not added twice.
A footprint is a pure function of what determines the index (the retrieval config with its
encoder, the chunking, the corpus: :func:`index_key`), so it is kept per process
(:func:`known_footprint`): a sweep's configs that share an index (the same retriever under two
rerankers) size it once, and a run whose rankings came from the cache loads the index only when
no earlier job of the process sized it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.text_vectors import encoding_counts

INDEX_STAGES = ("embeddings", "bm25-index", "faiss-index")
#: Kinds of bytes that make up the stored index (``vectors_bytes`` lie inside ``faiss_bytes``).
STORED_KINDS = ("faiss_bytes", "bm25_bytes")


@dataclass(frozen=True)
class IndexBuild:
    seconds: float
    cold: bool


def _cached_reads(cache: StageCache) -> int:
    passages = sum(counts.get("cached", 0) for counts in encoding_counts().values())
    return sum(cache.hits[stage] for stage in INDEX_STAGES) + passages


def timed_index(retriever: Any, chunks: Sequence, cache: StageCache) -> IndexBuild:
    """``retriever.index(chunks)``, timed; ``cold`` as the module docstring says."""
    before = _cached_reads(cache)
    started = time.perf_counter()
    retriever.index(chunks)
    seconds = time.perf_counter() - started
    return IndexBuild(seconds, cold=_cached_reads(cache) == before)


_FOOTPRINTS: dict[str, dict[str, float]] = {}


def index_key(retrieval: Any, chunking: Any, corpus_fingerprint: str) -> str:
    """What determines an index: the resolved retrieval config (its encoder included), the
    chunker's effective options and the corpus."""
    return stable_hash({"retrieval": retrieval, "chunking": chunking, "corpus": corpus_fingerprint})


def known_footprint(key: str) -> dict[str, float] | None:
    """The footprint this process measured for the index ``key``, if any."""
    return _FOOTPRINTS.get(key)


def footprint(retriever: Any, key: str | None = None) -> dict[str, float]:
    """``{"index_bytes": ..., "index_<kind>": ...}`` (module docstring), remembered under ``key``;
    ``{}`` without one."""
    parts = getattr(retriever, "index_footprint", None)
    if parts is None:
        return {}
    sizes = {kind: float(size) for kind, size in parts().items()}
    out = {f"index_{kind}": size for kind, size in sizes.items()}
    out["index_bytes"] = sum(sizes.get(kind, 0.0) for kind in STORED_KINDS) or sum(sizes.values())
    if key is not None:
        _FOOTPRINTS[key] = out
    return out
