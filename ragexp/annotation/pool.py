"""Candidate passages for a question, pooled from several pipelines as TREC pooling does.

Each pipeline (default: ``bm25``, ``dense``, ``hybrid_rrf`` from ``conf/retrieval``, over the
corpus chunked with the run default ``conf/chunking`` ``markdown``) returns its top ``k`` chunks;
the pool is their union, shuffled with a seed derived from ``seed`` and the question (the same
question always shows the same order), and which pipeline found a passage is not shown: the person
judges the passage, not the system. Each candidate carries its title, its page in a paged document
("p. 3"), and up to :data:`CONTEXT_CHARS` of surrounding text, all as offsets into the document
text the eval set's spans index.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from ragexp.data import Chunk, Corpus
from ragexp.runtime.fingerprint import stable_hash

DEFAULT_PIPELINES = ("bm25", "dense", "hybrid_rrf")
DEFAULT_DEPTH = 5
CONTEXT_CHARS = 200


def default_chunker():
    """The chunker a default run uses (``conf/config.yaml``'s chunking group)."""
    from ragexp.chunking import make_chunker
    from ragexp.config.compose import compose_config
    from ragexp.config.schema import chunker_options

    return make_chunker(chunker_options(compose_config().chunking))


def page_label(document, start: int, end: int) -> str | None:
    first, last = document.page_of(start), document.page_of(max(start, end - 1))
    if first is None:
        return None
    return f"p. {first}" if first == last else f"pp. {first}-{last}"


def passage(corpus: Corpus, doc_id: str, start: int, end: int, *, unit_id: str | None = None,
            context: int = CONTEXT_CHARS) -> dict:
    """A passage as the page shows it: ``text`` is ``document.text[start:end]``, ``before`` and
    ``after`` the context around it (``context_start`` is where ``before`` begins)."""
    document = corpus[doc_id]
    lo, hi = max(0, start - context), min(len(document.text), end + context)
    return {"unit_id": unit_id, "doc_id": doc_id, "title": document.title, "start": start, "end": end,
            "page": page_label(document, start, end), "context_start": lo, "before": document.text[lo:start],
            "text": document.text[start:end], "after": document.text[end:hi]}


class Pooler:
    """Builds each pipeline once (lazily, on the first question) over the current corpus."""

    def __init__(self, pipelines: Sequence[str] = DEFAULT_PIPELINES, depth: int = DEFAULT_DEPTH, seed: int = 0,
                 cache=None) -> None:
        self.pipelines = tuple(pipelines)
        self.depth = depth
        self.seed = seed
        self.cache = cache
        self.lock = threading.Lock()
        self._built_for: str | None = None
        self._retrievers: list = []
        self.chunks: list[Chunk] = []

    def _build(self, corpus: Corpus) -> None:
        from ragexp.config.compose import compose_config
        from ragexp.evaluation.pipeline import build_component
        from ragexp.runtime.stage_cache import StageCache

        cache = self.cache or StageCache()
        self.chunks = default_chunker().chunk_corpus(corpus)
        self._retrievers = []
        for name in self.pipelines:
            cfg = compose_config([f"retrieval={name}"])
            retriever = build_component(cfg.retrieval, "retrieval", cache)
            retriever.index(self.chunks)
            self._retrievers.append(retriever)
        self._built_for = corpus.fingerprint()

    def warm(self, corpus: Corpus) -> None:
        """Build the pipelines now (the CLI calls it in a background thread while the page loads)."""
        with self.lock:
            if self._built_for != corpus.fingerprint():
                self._build(corpus)

    def pool(self, corpus: Corpus, query: str) -> list[dict]:
        """The shuffled union of every pipeline's top :attr:`depth` for ``query``."""
        with self.lock:
            if self._built_for != corpus.fingerprint():
                self._build(corpus)
            by_id = {chunk.id: chunk for chunk in self.chunks}
            found: dict[str, Chunk] = {}
            for retriever in self._retrievers:
                for unit_id, _ in retriever.search([query], self.depth)[0]:
                    found.setdefault(unit_id, by_id[unit_id])
        ids = sorted(found)
        random.Random(stable_hash([self.seed, query])).shuffle(ids)
        return [passage(corpus, found[i].doc_id, found[i].start, found[i].end, unit_id=i) for i in ids]
