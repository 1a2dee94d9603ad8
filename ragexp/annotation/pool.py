"""Candidate passages for a question, pooled from several pipelines as TREC pooling does.

Each pipeline (default: ``bm25``, ``dense``, ``hybrid_rrf`` from ``conf/retrieval``, over the
corpus chunked as the eval set's header names (``chunking``), else with the run default
``conf/chunking`` ``markdown``) returns its top ``k`` chunks; the pool is their union, shuffled
with a seed derived from ``seed`` and the question (the same question always shows the same
order), and which pipeline found a passage is not shown: the person judges the passage, not the
system. Units with no text beyond Markdown headings (a ``## CTA-861`` chunk) are dropped and
counted: there is nothing in them to judge. Each candidate carries its title, the heading path of
the section it starts in, its page in a paged document ("p. 3"), up to :data:`CONTEXT_CHARS` of
surrounding text, all as offsets into the document text the eval set's spans index, and
``same_text``: the other candidates whose text is identical (whitespace aside), so a repeated
section is seen as one.
"""

from __future__ import annotations

import bisect
import functools
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragexp.chunking.markdown import markdown_sections
from ragexp.data import Chunk, Corpus
from ragexp.runtime.fingerprint import stable_hash

DEFAULT_PIPELINES = ("bm25", "dense", "hybrid_rrf")
DEFAULT_DEPTH = 5
CONTEXT_CHARS = 200


def default_chunker(chunking: Mapping | None = None):
    """The chunker ``chunking`` names (an eval set header's options), else the one a default run
    uses (``conf/config.yaml``'s chunking group)."""
    from ragexp.chunking import make_chunker
    from ragexp.config.compose import compose_config
    from ragexp.config.schema import chunker_options

    return make_chunker(dict(chunking) if chunking is not None else chunker_options(compose_config().chunking))


def heading_only(text: str) -> bool:
    """Whether ``text`` holds nothing but Markdown heading lines and whitespace."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.split("\n"))


@functools.lru_cache(maxsize=256)
def _sections(text: str) -> tuple[list[int], list[tuple[str, ...]]]:
    sections = markdown_sections(text)
    return [start for start, _, _ in sections], [path for _, _, path in sections]


def heading_path(text: str, offset: int) -> list[str]:
    """The Markdown heading path of the section ``offset`` lies in (``[]`` above the first heading)."""
    starts, paths = _sections(text)
    index = bisect.bisect_right(starts, offset) - 1
    return list(paths[index]) if index >= 0 else []


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
            "headings": heading_path(document.text, start),
            "page": page_label(document, start, end), "context_start": lo, "before": document.text[lo:start],
            "text": document.text[start:end], "after": document.text[end:hi]}


@dataclass
class Pool:
    """One question's candidates (module docstring) and how many heading-only units were dropped."""

    candidates: list[dict]
    heading_only: int = 0


def mark_identical(candidates: list[dict]) -> None:
    """Set each candidate's ``same_text``: the unit ids of the other candidates with the same text."""
    by_text: dict[str, list[dict]] = {}
    for candidate in candidates:
        by_text.setdefault(" ".join(candidate["text"].split()), []).append(candidate)
    for group in by_text.values():
        for candidate in group:
            candidate["same_text"] = [other["unit_id"] for other in group if other is not candidate]


class Pooler:
    """Builds each pipeline once (lazily, on the first question) over the current corpus."""

    def __init__(self, pipelines: Sequence[str] = DEFAULT_PIPELINES, depth: int = DEFAULT_DEPTH, seed: int = 0,
                 cache=None, chunking: Mapping | None = None) -> None:
        self.chunking = chunking  # the eval set's chunking options; None: the run default
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
        self.chunks = self.chunker().chunk_corpus(corpus)
        self._retrievers = []
        for name in self.pipelines:
            cfg = compose_config([f"retrieval={name}"])
            retriever = build_component(cfg.retrieval, "retrieval", cache)
            retriever.index(self.chunks)
            self._retrievers.append(retriever)
        self._built_for = corpus.fingerprint()

    def chunker(self):
        """The chunker the pool's units come from (module docstring)."""
        return default_chunker(self.chunking)

    def warm(self, corpus: Corpus) -> None:
        """Build the pipelines now (the CLI calls it in a background thread while the page loads)."""
        with self.lock:
            if self._built_for != corpus.fingerprint():
                self._build(corpus)

    def pool(self, corpus: Corpus, query: str) -> Pool:
        """The shuffled union of every pipeline's top :attr:`depth` for ``query``, heading-only units dropped."""
        with self.lock:
            if self._built_for != corpus.fingerprint():
                self._build(corpus)
            by_id = {chunk.id: chunk for chunk in self.chunks}
            found: dict[str, Chunk] = {}
            for retriever in self._retrievers:
                for unit_id, _ in retriever.search([query], self.depth)[0]:
                    found.setdefault(unit_id, by_id[unit_id])
        ids = sorted(i for i in found if not heading_only(found[i].text))
        random.Random(stable_hash([self.seed, query])).shuffle(ids)
        candidates = [passage(corpus, found[i].doc_id, found[i].start, found[i].end, unit_id=i) for i in ids]
        mark_identical(candidates)
        return Pool(candidates, heading_only=len(found) - len(ids))
