"""Ranked full-text search over the corpus, for evidence no pipeline retrieved.

The corpus is cut into *units*: paragraphs (text between blank lines), a paragraph longer than
:data:`MAX_UNIT_CHARS` cut at whitespace into pieces of at most that length. A query is read as the
BM25 pipeline reads text (:func:`ragexp.text.tokenize.word_stems`) and each unit scored with Okapi
BM25 (ragexp's one BM25, :mod:`ragexp.text.bm25`: rank_bm25's ``BM25Okapi``, k1 = 1.5, b = 0.75,
over the units as documents):

    score(q, u) = sum over query stems t (with repeats) of idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |u| / avgdl))
    idf(t) = ln(N - df + 0.5) - ln(df + 0.5), floored to 0.25 * mean idf where negative

Units holding the query as a phrase (its words in order, any whitespace between, any case, also
inside longer words: the exact quote a person pastes) rank above every other unit; within each
group the higher BM25 score first, ties in corpus order. Units with neither a phrase match nor a
score > 0 are left out; the first ``limit`` (20) are returned. Each hit is the unit as a passage
(:func:`ragexp.annotation.pool.passage`, offsets into the document text; widened to a phrase
occurrence that runs on into the next paragraph) with ``matches``: the phrase occurrences, or else
the words whose stem the query holds, for the page to highlight.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ragexp.annotation.pool import passage
from ragexp.datamodel import Corpus
from ragexp.text.bm25 import build_index
from ragexp.text.tokenize import word_stems

DEFAULT_LIMIT = 20
MAX_UNIT_CHARS = 1200
UNIT_CONTEXT = 80
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


@dataclass(frozen=True)
class Unit:
    doc_id: str
    start: int
    end: int


def units_of(doc_id: str, text: str) -> list[Unit]:
    """The paragraphs of ``text`` (blank-line separated, surrounding whitespace left out), long ones cut."""
    units, at = [], 0
    for cut in [*_PARAGRAPH_BREAK.finditer(text), None]:
        end = cut.start() if cut else len(text)
        start = at
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        while start < end:
            piece_end = end
            if piece_end - start > MAX_UNIT_CHARS:
                space = text.rfind(" ", start + 1, start + MAX_UNIT_CHARS)
                piece_end = space if space > start else start + MAX_UNIT_CHARS
            units.append(Unit(doc_id, start, piece_end))
            start = piece_end
            while start < end and text[start].isspace():
                start += 1
        at = cut.end() if cut else len(text)
    return units


class CorpusSearch:
    """The BM25 index over one corpus's units, built on the first search of that corpus."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._corpus: Corpus | None = None
        self._units: list[Unit] = []
        self._bm25 = None

    def _index(self, corpus: Corpus) -> None:
        with self.lock:
            if self._corpus is corpus:
                return
            units = [u for d in corpus.values() for u in units_of(d.id, d.text)]
            tokens = [[stem for stem, _, _ in word_stems(corpus[u.doc_id].text[u.start:u.end])] for u in units]
            self._bm25 = build_index(tokens) if any(tokens) else None
            self._units, self._corpus = units, corpus

    def search(self, corpus: Corpus, query: str, limit: int = DEFAULT_LIMIT) -> list[dict]:
        query = " ".join(query.split())
        if not query:
            return []
        self._index(corpus)
        units, bm25 = self._units, self._bm25
        stems = [stem for stem, _, _ in word_stems(query)]
        scores = bm25.scores([stems])[0].tolist() if bm25 is not None and stems else [0.0] * len(units)
        phrases = _phrase_matches(corpus, units, query)
        ranked = sorted((i for i in range(len(units)) if i in phrases or scores[i] > 0),
                        key=lambda i: (i not in phrases, -scores[i], i))
        hits = []
        for i in ranked[:limit]:
            unit = units[i]
            text = corpus[unit.doc_id].text
            matches = phrases.get(i) or [[unit.start + s, unit.start + e]
                                         for stem, s, e in word_stems(text[unit.start:unit.end]) if stem in stems]
            start, end = min([unit.start, *(s for s, _ in matches)]), max([unit.end, *(e for _, e in matches)])
            hit = passage(corpus, unit.doc_id, start, end, context=UNIT_CONTEXT)  # a phrase may run on past the unit
            hits.append({**hit, "matches": matches, "exact": i in phrases, "score": round(scores[i], 4)})
        return hits


def _phrase_matches(corpus: Corpus, units: list[Unit], query: str) -> dict[int, list[list[int]]]:
    """Unit index -> ``[start, end]`` of every occurrence of the phrase starting in that unit."""
    pattern = re.compile(r"\s+".join(re.escape(word) for word in query.split()), re.IGNORECASE)
    found: dict[int, list[list[int]]] = {}
    first_of_doc: dict[str, int] = {}
    for i, unit in enumerate(units):
        first_of_doc.setdefault(unit.doc_id, i)
    for doc_id, first in first_of_doc.items():
        text, i = corpus[doc_id].text, first
        for match in pattern.finditer(text):
            while i + 1 < len(units) and units[i + 1].doc_id == doc_id and units[i + 1].start <= match.start():
                i += 1
            found.setdefault(i, []).append([match.start(), match.end()])
    return found
