"""Candidate passages for a question, pooled from several pipelines as TREC pooling does.

Each pipeline (default: ``bm25``, ``dense``, ``hybrid_rrf`` from ``conf/retrieval``, over the
corpus chunked as the eval set's header names (``chunking``), else with the run default
``conf/chunking`` ``markdown``) returns its top ``k`` chunks; the pool is their union, shuffled
by a hash of ``seed``, the question and the unit (the same question always shows the same
order, and a unit found later takes its own place without moving the others), and which
pipeline found a passage is not shown: the person judges the passage, not the
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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragexp.chunking.markdown import markdown_sections
from ragexp.datamodel import Chunk, Corpus
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
    """One question's candidates (module docstring), how many heading-only units were dropped,
    the pipelines still being built (their candidates come later) and those that failed (why)."""

    candidates: list[dict]
    heading_only: int = 0
    pending: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def mark_identical(candidates: list[dict]) -> None:
    """Set each candidate's ``same_text``: the unit ids of the other candidates with the same text."""
    by_text: dict[str, list[dict]] = {}
    for candidate in candidates:
        by_text.setdefault(" ".join(candidate["text"].split()), []).append(candidate)
    for group in by_text.values():
        for candidate in group:
            candidate["same_text"] = [other["unit_id"] for other in group if other is not candidate]


#: The retriever that needs no model: built first, so the first question is pooled in seconds.
LEXICAL_TARGET = "reference_pipelines.bm25.BM25Retriever"


class Pooler:
    """Builds each pipeline once per corpus, in a background thread, lexical ones first (see
    :data:`LEXICAL_TARGET`); :meth:`pool` answers as soon as one pipeline is built, with the
    pipelines still being built in :attr:`Pool.pending` (the page asks again as they finish)."""

    def __init__(self, pipelines: Sequence[str] = DEFAULT_PIPELINES, depth: int = DEFAULT_DEPTH, seed: int = 0,
                 cache=None, chunking: Mapping | None = None) -> None:
        self.chunking = chunking  # the eval set's chunking options; None: the run default
        self.pipelines = tuple(pipelines)
        self.depth = depth
        self.seed = seed
        self.cache = cache
        self.changed = threading.Condition()  # guards everything below; notified when a pipeline is built
        self.search_lock = threading.Lock()  # one search at a time (the retrievers are not thread-safe)
        self._built_for: str | None = None
        self._generation = 0
        self._ready: dict[int, object] = {}  # pipeline index -> built retriever
        self._failed: dict[int, str] = {}  # pipeline index -> why it could not be built
        self.chunks: list[Chunk] = []

    def chunker(self):
        """The chunker the pool's units come from (module docstring)."""
        return default_chunker(self.chunking)

    def _start(self, corpus: Corpus) -> None:
        """Chunk ``corpus`` and start building its pipelines, unless that is under way or done (call holding :attr:`changed`)."""
        if self._built_for == corpus.fingerprint():
            return
        self.chunks = self.chunker().chunk_corpus(corpus)
        self._built_for, self._ready, self._failed = corpus.fingerprint(), {}, {}
        self._generation += 1
        threading.Thread(target=self._build, args=(self._generation, list(self.chunks)), daemon=True,
                         name="pool-build").start()

    def _build(self, generation: int, chunks: list[Chunk]) -> None:
        from ragexp.config.compose import compose_config
        from ragexp.evaluation.pipeline import build_component
        from ragexp.runtime.stage_cache import StageCache

        cache = self.cache or StageCache()
        configs = [compose_config([f"retrieval={name}"]).retrieval for name in self.pipelines]
        order = sorted(range(len(configs)), key=lambda i: configs[i].get("_target_") != LEXICAL_TARGET)
        for index in order:
            try:
                retriever = build_component(configs[index], "retrieval", cache)
                retriever.index(chunks)
            except Exception as err:  # noqa: BLE001 - shown on the page; the other pipelines go on
                with self.changed:
                    if generation == self._generation:
                        self._failed[index] = f"{type(err).__name__}: {err}"
                        self.changed.notify_all()
                continue
            with self.changed:
                if generation != self._generation:
                    return  # the corpus changed meanwhile: a newer build took over
                self._ready[index] = retriever
                self.changed.notify_all()

    def _settled(self) -> bool:
        return len(self._ready) + len(self._failed) == len(self.pipelines)

    def warm(self, corpus: Corpus, *, first_only: bool = False) -> None:
        """Build the pipelines for ``corpus`` now; returns when all are built (or failed), or with
        ``first_only`` as soon as the first one is (the others go on building)."""
        with self.changed:
            self._start(corpus)
            self.changed.wait_for(lambda: (first_only and self._ready) or self._settled())

    def pool(self, corpus: Corpus, query: str) -> Pool:
        """The union of the built pipelines' top :attr:`depth` for ``query`` (module docstring),
        heading-only units dropped, in an order fixed by the seed, the question and the unit alone
        (:func:`pool_order`), so a pool that grows keeps the order of what it showed."""
        with self.changed:
            self._start(corpus)
            self.changed.wait_for(lambda: self._ready or self._settled())
            retrievers = [self._ready[i] for i in sorted(self._ready)]
            pending = [self.pipelines[i] for i in range(len(self.pipelines)) if i not in self._ready and i not in self._failed]
            failed = {self.pipelines[i]: why for i, why in sorted(self._failed.items())}
            by_id = {chunk.id: chunk for chunk in self.chunks}
        found: dict[str, Chunk] = {}
        with self.search_lock:
            for retriever in retrievers:
                for unit_id, _ in retriever.search([query], self.depth)[0]:
                    found.setdefault(unit_id, by_id[unit_id])
        ids = pool_order((i for i in found if not heading_only(found[i].text)), self.seed, query)
        candidates = [passage(corpus, found[i].doc_id, found[i].start, found[i].end, unit_id=i) for i in ids]
        mark_identical(candidates)
        return Pool(candidates, heading_only=len(found) - len(ids), pending=pending, failed=failed)


def pool_order(unit_ids, seed: int, query: str) -> list[str]:
    """Units sorted by a hash of (seed, question, unit id): a shuffle in which every unit's place
    depends on itself alone, so adding units never reorders the others."""
    return sorted(unit_ids, key=lambda unit_id: stable_hash([seed, query, unit_id]))
