"""Placing a system's passage in the live corpus: ``(doc_id, start, end)``, and how it was found.

Stages, first success wins (each :class:`Placement` records which, with its similarity):

1. ``exact``: the passage (surrounding whitespace stripped) occurs verbatim, and nowhere else,
   verbatim or (for a passage without markup, which may be a page's text with its markup
   stripped) once normalised.
   Without a document the verbatim search is complete: every document that holds all of the
   passage's rarest interior words (its first and last word may be cut, so they are not used) is
   searched, and those are all the documents that can hold it verbatim.
2. ``normalised``: equal after the rewrites a system plausibly applied
   (:func:`~ragexp.systems.normalised_text.comparable`: whitespace, Unicode NFKC and case, HTML
   tags and entities, Markdown markup; an ellipsis at either end), also with the document's title
   removed from the passage's start. Searched in the documents of stage 1 and those of the
   ``candidates`` best BM25 windows.
3. ``fuzzy``: a bounded alignment (rapidfuzz ``partial_ratio_alignment`` of the comparable forms,
   normalised Indel similarity) against the region around each of the ``candidates`` windows
   that ragexp's own BM25 (:mod:`ragexp.text.bm25`) ranks best for the passage; the best
   alignment counts when its similarity is at least ``min_similarity`` and the passage has at
   least :data:`MIN_FUZZY_CHARS` comparable characters.

A system's document id (or source path / URL) restricts every stage to that document; an id the
corpus does not have leaves the passage ``unlocated`` (never placed elsewhere by its text: a
stale or foreign index is a finding). A text found in two places (two occurrences, or two
alignments within ``ambiguity_margin`` of the best) is ``ambiguous`` with the documents named,
never guessed. Windows are :data:`WINDOW_CHARS` characters every :data:`WINDOW_STRIDE`, so any
passage up to the stride lies whole in one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

import numpy as np
from rapidfuzz import fuzz

from ragexp.datamodel import Corpus
from ragexp.errors import RagexpInputError
from ragexp.systems.normalised_text import Comparable, comparable, has_markup, passage_forms
from ragexp.systems.passage_header import HeaderTemplate, content_span
from ragexp.text.bm25 import InvertedIndex, build_index
from ragexp.text.tokenize import Tokenizer

WINDOW_CHARS = 1000
WINDOW_STRIDE = 500
#: Below this many comparable characters a fuzzy alignment says little: the passage stays unplaced.
MIN_FUZZY_CHARS = 30
#: Interior words intersected to find the documents that can hold a passage verbatim.
FILTER_WORDS = 4
#: File suffixes a system's source path may carry beyond the corpus's document id.
DOC_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")
HOW_LOCATED = ("exact", "normalised", "fuzzy")
#: Pads a region for alignment; no comparable text holds it.
PAD = "\x00"
#: A passage with more comparable characters than this is aligned by anchors and blocks
#: (:meth:`Locator._fuzzy_long`), so fuzzy placement costs time linear in its length.
ALIGN_CHARS = 2000
#: The head and tail aligned to find a long passage's two ends; the block size its similarity is measured in.
ANCHOR_CHARS = 500
BLOCK_CHARS = 1000
#: Characters at a fuzzy placement's ends looked up verbatim to refine its boundaries, and how far.
EDGE_CHARS = 12
EDGE_SLACK = 40
#: Occurrences of one text kept per document (a document's count past it is shown as "at least").
HITS_PER_DOC = 10


@dataclass(frozen=True)
class LocateOptions:
    """``min_similarity``: the least fuzzy similarity (0-1) placed; ``candidates``: BM25 windows
    aligned per passage; ``ambiguity_margin``: a second place within this of the best makes the
    passage ambiguous; ``min_located_rate``: below this share of a run's passages placed, the run
    refuses to log a result (:mod:`ragexp.systems.located_floor`)."""

    min_similarity: float = 0.9
    candidates: int = 10
    ambiguity_margin: float = 0.03
    min_located_rate: float = 0.95

    def __post_init__(self) -> None:
        if not 0.5 <= self.min_similarity <= 1.0:
            raise RagexpInputError(f"must be in [0.5, 1], got {self.min_similarity!r}", field="system.locate.min_similarity")
        if not 1 <= self.candidates <= 1000:
            raise RagexpInputError(f"must be in [1, 1000], got {self.candidates!r}", field="system.locate.candidates")
        if not 0.0 <= self.ambiguity_margin < 0.5:
            raise RagexpInputError(f"must be in [0, 0.5), got {self.ambiguity_margin!r}",
                                   field="system.locate.ambiguity_margin")
        rate = self.min_located_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise RagexpInputError(f"must be a number in [0, 1], got {rate!r}", field="system.locate.min_located_rate")


@dataclass(frozen=True)
class Placement:
    """Where a passage lies: ``how`` is ``exact``/``normalised``/``fuzzy`` (placed, with
    ``doc_id``, ``[start, end)`` and ``similarity`` in [0, 1]) or ``unlocated``/``ambiguous``
    (with ``reason``; ``candidates``: the documents an ambiguous text matched)."""

    how: str
    doc_id: str | None = None
    start: int | None = None
    end: int | None = None
    similarity: float | None = None
    reason: str = ""
    candidates: tuple[str, ...] = ()

    @property
    def located(self) -> bool:
        return self.how in HOW_LOCATED

    def to_record(self) -> dict:
        record = {"how": self.how, "doc_id": self.doc_id, "start": self.start, "end": self.end,
                  "similarity": self.similarity}
        if self.reason:
            record["reason"] = self.reason
        if self.candidates:
            record["candidates"] = list(self.candidates)
        return record


@dataclass(frozen=True)
class _Hit:
    doc_id: str
    start: int
    end: int
    score: float  # 0-1

    def overlaps(self, other: _Hit) -> bool:
        return self.doc_id == other.doc_id and self.start < other.end and other.start < self.end


@dataclass
class _Windows:
    """The corpus cut into windows, indexed by BM25 (terms x windows)."""

    doc_ids: list[str]
    window_doc: np.ndarray  # document index of each window
    window_start: np.ndarray
    window_end: np.ndarray
    doc_windows: dict[str, tuple[int, int]]  # first window, one past the last, of each document
    index: InvertedIndex


class Locator:
    """Places passages in ``corpus`` (module docstring); the index is built on first use."""

    def __init__(self, corpus: Corpus | Mapping, options: LocateOptions = LocateOptions(), *,
                 template: HeaderTemplate | None = None) -> None:
        """``template``: the framework's passage template (``system.response.template``), else the
        known metadata headers are recognised (:mod:`ragexp.systems.passage_header`)."""
        self.corpus = corpus
        self.options = options
        self.template = template
        self.tokenize = Tokenizer()
        self._windows: _Windows | None = None
        self._comparable_cache: dict[tuple[str, int, int], Comparable] = {}
        self._titles: dict[str, str] = {}

    # --- documents ---------------------------------------------------------------------------

    def resolve_document(self, name: str) -> str | None:
        """The corpus document a system's id, source path or URL names: the id itself, else the
        path without scheme, host, query, leading folders or a file suffix, matched against the
        corpus ids; ``None`` when none matches."""
        if name in self.corpus:
            return name
        path = unquote(urlsplit(name).path if "://" in name else name).replace("\\", "/").strip()
        parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".")]
        if not parts:
            return None
        stem = parts[-1]
        for suffix in DOC_SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        parts[-1] = stem
        for first in range(len(parts)):
            candidate = "/".join(parts[first:])
            if candidate in self.corpus:
                return candidate
        return None

    # --- index -------------------------------------------------------------------------------

    def _index(self) -> _Windows:
        if self._windows is None:
            self._windows = self._build()
        return self._windows

    def _build(self) -> _Windows:
        doc_ids, window_doc, starts, ends, texts = [], [], [], [], []
        doc_windows = {}
        for number, (doc_id, document) in enumerate(self.corpus.items()):
            doc_ids.append(doc_id)
            first = len(starts)
            length = len(document.text)
            for start in range(0, max(1, length - WINDOW_CHARS + WINDOW_STRIDE), WINDOW_STRIDE):
                end = min(length, start + WINDOW_CHARS)
                window_doc.append(number)
                starts.append(start)
                ends.append(end)
                head = f"{document.title} " if start == 0 and document.title else ""
                texts.append(head + document.text[start:end])
            doc_windows[doc_id] = (first, len(starts))
        index = build_index((self.tokenize(text) for text in texts), variant="okapi")
        return _Windows(doc_ids, np.array(window_doc, dtype=np.int64), np.array(starts, dtype=np.int64),
                        np.array(ends, dtype=np.int64), doc_windows, index)

    def _docs_with_words(self, tokens: Sequence[str]) -> list[str] | None:
        """The documents holding every one of the passage's rarest interior words (a superset of
        those holding it verbatim); ``None`` when it has none to filter by (every document)."""
        windows = self._index()
        index = windows.index
        interior = set(tokens[1:-1])
        if not interior:
            return None
        rows = []
        for token in interior:
            term = index.vocabulary.get(token)
            if term is None:
                return []  # a whole word no document has: no verbatim occurrence anywhere
            rows.append((index.weights.indptr[term + 1] - index.weights.indptr[term], term))
        docs = None
        for _, term in sorted(rows)[:FILTER_WORDS]:
            postings = index.weights.indices[index.weights.indptr[term]:index.weights.indptr[term + 1]]
            found = np.unique(windows.window_doc[postings])
            docs = found if docs is None else np.intersect1d(docs, found, assume_unique=True)
            if docs.size == 0:
                break
        return [windows.doc_ids[i] for i in docs.tolist()]

    def _best_windows(self, tokens: Sequence[str], doc_id: str | None) -> list[int]:
        """The ``candidates`` windows BM25 ranks best for the passage (within ``doc_id`` if given)."""
        windows = self._index()
        if doc_id is not None:
            first, last = windows.doc_windows[doc_id]
        else:
            first, last = 0, len(windows.window_doc)
        if last - first <= self.options.candidates:
            return list(range(first, last))
        scores = windows.index.scores([list(tokens)])[0][first:last]
        top = np.argsort(-scores, kind="stable")[: self.options.candidates]
        return [first + int(i) for i in top if scores[i] > 0] or list(range(first, min(last, first + self.options.candidates)))

    def _comparable(self, doc_id: str, start: int = 0, end: int | None = None) -> Comparable:
        text = self.corpus[doc_id].text
        end = len(text) if end is None else end
        key = (doc_id, start, end)
        found = self._comparable_cache.get(key)
        if found is None:
            if len(self._comparable_cache) > 4096:
                self._comparable_cache.clear()
            made = comparable(text[start:end])
            found = Comparable(made.form, made.offsets + start)
            self._comparable_cache[key] = found
        return found

    def _title_form(self, doc_id: str) -> str:
        found = self._titles.get(doc_id)
        if found is None:
            found = self._titles[doc_id] = comparable(self.corpus[doc_id].title).form
        return found

    # --- placing -------------------------------------------------------------------------------

    def locate(self, text: str, doc_id: str | None = None, path: str | None = None) -> Placement:
        """Where ``text`` lies (module docstring); ``doc_id``/``path``: what the system says its document is.

        A metadata header (:func:`~ragexp.systems.passage_header.content_span`) is cut before
        placing unless the whole passage occurs verbatim; when the document holds the cut header
        right before the placed text, the placement takes it back in."""
        named = doc_id or path
        document = None
        if named:
            document = self.resolve_document(named)
            if document is None:
                return Placement("unlocated", doc_id=named, reason=f"document {named!r} is not in the corpus")
        start, end = content_span(text, self.template)
        if (start, end) == (0, len(text)) or not text[start:end].strip():
            return self._place(text, document, named)
        whole = text.strip()
        filtered = [document] if document is not None else self._docs_with_words(self.tokenize(whole))
        if whole and self._exact(whole, list(self.corpus) if filtered is None else filtered):
            return self._place(text, document, named)
        placed = self._place(text[start:end], document, named)
        header = text[:start].strip()
        if placed.located and header:
            body = self.corpus[placed.doc_id].text
            before = body[max(0, placed.start - start - EDGE_SLACK):placed.start]
            at = before.rfind(header)
            if at >= 0 and not before[at + len(header):].strip():
                return replace(placed, start=placed.start - len(before) + at)
        return placed

    def _place(self, text: str, document: str | None, named: str | None) -> Placement:
        stripped = text.strip()
        if not stripped:
            return Placement("unlocated", doc_id=named, reason="the passage is empty")
        tokens = self.tokenize(stripped)
        filtered = [document] if document is not None else self._docs_with_words(tokens)
        searched = list(self.corpus) if filtered is None else filtered
        exact = self._exact(stripped, searched)
        forms = passage_forms(stripped)
        if exact:
            # A passage without markup may be another page's text with its markup stripped, so its
            # verbatim place is the place only if no other place holds the same text once
            # normalised (such a place holds the same words: it is among the searched documents).
            # A passage with markup was not stripped: its verbatim place stands.
            normalised = self._normalised(stripped, searched) if forms and not has_markup(stripped) else []
            others = [h for h in _merged(normalised) if not any(h.overlaps(e) for e in exact)]
            return _decide(exact + others, "exact", 0.0)
        if not forms:
            return Placement("unlocated", doc_id=named, reason="the passage has no text once markup is removed")
        candidates = [document] if document is not None else list(dict.fromkeys(
            [*(filtered or []), *(self._index().doc_ids[self._index().window_doc[w]] for w in self._best_windows(tokens, None))]))
        normalised = self._normalised(stripped, candidates)
        if normalised:
            return _decide(normalised, "normalised", 0.0)
        return self._fuzzy(forms[-1], tokens, document, named)

    def _exact(self, text: str, doc_ids: Sequence[str]) -> list[_Hit]:
        hits = []
        for doc_id in doc_ids:
            body = self.corpus[doc_id].text
            at, found = body.find(text), 0
            while at >= 0 and found < HITS_PER_DOC:
                hits.append(_Hit(doc_id, at, at + len(text), 1.0))
                found += 1
                at = body.find(text, at + 1)
        return hits

    def _normalised(self, text: str, doc_ids: Sequence[str]) -> list[_Hit]:
        forms = passage_forms(text)
        hits = []
        for doc_id in doc_ids:
            body = self._comparable(doc_id)
            for form in [*forms, *self._untitled_forms(text, forms, doc_id)]:
                found = len(hits)
                at = body.form.find(form)
                while at >= 0 and len(hits) - found < HITS_PER_DOC:
                    hits.append(_Hit(doc_id, *body.span(at, at + len(form)), 1.0))
                    at = body.form.find(form, at + 1)
                if len(hits) > found:
                    break  # the first form that matches in this document
        return hits

    def _untitled_forms(self, text: str, forms: Sequence[str], doc_id: str) -> list[str]:
        """The passage's forms with the document's title removed from its start, if it starts with it."""
        title = self._title_form(doc_id)
        if not title or not forms or not forms[0].startswith(title) or len(forms[0]) == len(title):
            return []
        cut = int(comparable(text).offsets[len(title) - 1]) + 1
        return passage_forms(text[cut:])

    def _fuzzy(self, form: str, tokens: Sequence[str], document: str | None, named: str | None) -> Placement:
        where = f" in document {document!r}" if document else ""
        if len(form) < MIN_FUZZY_CHARS:
            return Placement("unlocated", doc_id=named, reason=f"not found{where}, and too short to align fuzzily")
        windows = self._index()
        cutoff = self.options.min_similarity * 100
        hits = []
        best_seen = 0.0
        if len(form) > ALIGN_CHARS:
            hits, best_seen = self._fuzzy_long(form, tokens, document)
        for w in self._best_windows(tokens, document) if len(form) <= ALIGN_CHARS else ():
            doc_id = windows.doc_ids[int(windows.window_doc[w])]
            length = len(self.corpus[doc_id].text)
            start = max(0, int(windows.window_start[w]) - len(form))
            end = min(length, int(windows.window_end[w]) + len(form))
            region = self._comparable(doc_id, start, end)
            # padded, so a window hanging over the region's end is a full-length window that
            # counts the missing characters, not a shorter one that drops them
            pad = len(form)
            aligned = fuzz.partial_ratio_alignment(form, PAD * pad + region.form + PAD * pad)
            if aligned is None:
                continue
            best_seen = max(best_seen, aligned.score)
            low, high = max(aligned.dest_start - pad, 0), min(aligned.dest_end - pad, len(region.form))
            if aligned.score >= cutoff and high > low:
                low, high = _refined(form, region.form, low, high)
                hits.append(_Hit(doc_id, *region.span(low, high), aligned.score / 100))
        placed = _decide(_merged(hits), "fuzzy", self.options.ambiguity_margin)
        if placed is not None:
            return placed
        return Placement("unlocated", doc_id=named,
                         reason=f"not found{where} (best fuzzy similarity {best_seen / 100:.2f} < {self.options.min_similarity})")

    def _fuzzy_long(self, form: str, tokens: Sequence[str], document: str | None) -> tuple[list[_Hit], float]:
        """A passage longer than :data:`ALIGN_CHARS`, in each document of its best windows: its
        head (:data:`ANCHOR_CHARS`) aligned within one passage length before the window, its tail
        within a quarter length of where the head says it ends, and the span between scored block
        by block: each :data:`BLOCK_CHARS` of the passage against the span's piece at the same
        proportional place (Indel similarity), the length-weighted mean of those less the length
        difference ``100 |span - passage| / (span + passage)`` (what an Indel distance charges for
        it). A head or tail below ``min_similarity`` ends the document's try, and the block
        measure stops once the cutoff is out of reach. Work: O(passage length x block) per
        document, at most ``candidates`` documents; ``best_seen`` is the best head similarity."""
        windows = self._index()
        size = len(form)
        head, tail = form[:ANCHOR_CHARS], form[-ANCHOR_CHARS:]
        hits, best_seen, seen = [], 0.0, set()
        cutoff = self.options.min_similarity * 100
        for w in self._best_windows(tokens, document):
            doc_id = windows.doc_ids[int(windows.window_doc[w])]
            body = self._comparable(doc_id)
            centre = int(np.searchsorted(body.offsets, int(windows.window_start[w])))
            low = max(0, centre - size - ANCHOR_CHARS)
            first = fuzz.partial_ratio_alignment(head, body.form[low:centre + WINDOW_CHARS], score_cutoff=cutoff)
            best_seen = max(best_seen, first.score if first is not None else 0.0)
            if first is None:
                continue
            start = low + first.dest_start
            if (doc_id, start) in seen:
                continue
            seen.add((doc_id, start))
            tail_low = start + size * 3 // 4 - ANCHOR_CHARS
            last = fuzz.partial_ratio_alignment(tail, body.form[max(tail_low, start):start + size * 5 // 4 + ANCHOR_CHARS],
                                                score_cutoff=cutoff)
            if last is None:
                continue
            end = max(tail_low, start) + last.dest_end
            if end - start < ANCHOR_CHARS:
                continue
            score = _blockwise(form, body.form[start:end], cutoff)
            if score >= cutoff:
                hits.append(_Hit(doc_id, *body.span(start, end), score / 100))
        return hits, best_seen


def _blockwise(form: str, span: str, cutoff: float) -> float:
    """Similarity (0-100) of a long passage's comparable form and a span (:meth:`Locator._fuzzy_long`);
    0 as soon as the blocks measured so far leave ``cutoff`` out of reach."""
    total, lost = 0.0, 0.0
    scale = len(span) / len(form)
    penalty = 100 * abs(len(span) - len(form)) / (len(span) + len(form))
    budget = (100 - cutoff - penalty) * len(form)
    for at in range(0, len(form), BLOCK_CHARS):
        block = form[at:at + BLOCK_CHARS]
        where = int(at * scale)
        score = fuzz.ratio(block, span[where:where + max(1, round(len(block) * scale))])
        total += score * len(block)
        lost += (100 - score) * len(block)
        if lost > budget:
            return 0.0
    return max(0.0, total / len(form) - penalty)


def _refined(form: str, region: str, low: int, high: int) -> tuple[int, int]:
    """A fuzzy alignment's ``[low, high)`` in ``region`` with each end moved to where the passage's
    first (last) :data:`EDGE_CHARS` characters occur verbatim within :data:`EDGE_SLACK` of it, the
    nearest such place; an end whose characters were edited stays where the alignment put it."""
    if len(form) < 2 * EDGE_CHARS:
        return low, high
    head, tail = form[:EDGE_CHARS], form[-EDGE_CHARS:]
    starts = [i for i in _occurrences(region, head, max(0, low - EDGE_SLACK), low + EDGE_SLACK + EDGE_CHARS)]
    ends = [i + EDGE_CHARS for i in _occurrences(region, tail, max(0, high - EDGE_SLACK - EDGE_CHARS), high + EDGE_SLACK)]
    new_low = min(starts, key=lambda i: abs(i - low)) if starts else low
    new_high = min(ends, key=lambda i: abs(i - high)) if ends else high
    return (new_low, new_high) if new_high > new_low else (low, high)


def _occurrences(text: str, piece: str, start: int, end: int) -> list[int]:
    out, at = [], text.find(piece, start, end)
    while at >= 0:
        out.append(at)
        at = text.find(piece, at + 1, end)
    return out


def _merged(hits: list[_Hit]) -> list[_Hit]:
    """Hits best first, each overlapping a better one dropped (two windows around one place)."""
    kept: list[_Hit] = []
    for hit in sorted(hits, key=lambda h: (-h.score, h.doc_id, h.start)):
        if not any(hit.overlaps(k) for k in kept):
            kept.append(hit)
    return kept


def _decide(hits: list[_Hit], how: str, margin: float) -> Placement | None:
    """One place: placed; two within ``margin`` of the best: ambiguous; none: ``None``."""
    if not hits:
        return None
    hits = _merged(hits)
    best = hits[0]
    rivals = [h for h in hits[1:] if h.score >= best.score - margin]
    if rivals:
        docs = tuple(dict.fromkeys(h.doc_id for h in [best, *rivals]))
        places = len(rivals) + 1
        if len(docs) == 1:
            where = f"{'at least ' if places >= HITS_PER_DOC else ''}{places} places in document {docs[0]!r}"
        else:
            named = ", ".join(docs[:5]) + (f" and {len(docs) - 5} more" if len(docs) > 5 else "")
            where = f"{len(docs)} documents ({named})"
        if how == "fuzzy":
            where += " (among the best BM25 windows aligned)"
        return Placement("ambiguous", reason=f"{how} match in {where}", candidates=docs)
    return Placement(how, best.doc_id, best.start, best.end, round(best.score, 6))


