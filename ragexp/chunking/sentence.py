"""``sentence``: whole sentences packed greedily into chunks of at most ``size`` characters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ragexp.chunking.base import CandidateSpan, Chunker, require_int
from ragexp.chunking.text_units import Span, non_space_runs, sentence_spans
from ragexp.datamodel import Document


@dataclass(frozen=True)
class SentenceChunker(Chunker):
    """Units are the sentences of :func:`~ragexp.chunking.text_units.sentence_spans`; a sentence
    longer than ``size`` is replaced by word pieces of at most ``size`` characters (a word longer
    than ``size`` is cut every ``size`` characters). Units are packed greedily: a chunk spans units
    ``i..j`` with ``units[j].end - units[i].start <= size``, so every chunk has at most ``size``
    characters. Each next chunk repeats the last ``overlap_sentences`` units of the previous one,
    fewer if they would leave no room for the next new unit.
    """

    name: ClassVar[str] = "sentence"
    size: int = 512
    overlap_sentences: int = 0

    def __post_init__(self) -> None:
        require_int(self.size, "size", 1)
        require_int(self.overlap_sentences, "overlap_sentences", 0)

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        units = self._units(doc.text)
        first = 0
        while first < len(units):
            last = first
            while last + 1 < len(units) and units[last + 1][1] - units[first][0] <= self.size:
                last += 1
            yield units[first][0], units[last][1], doc.title
            if last + 1 == len(units):
                return
            first = max(last + 1 - self.overlap_sentences, first + 1)
            while units[last + 1][1] - units[first][0] > self.size:
                first += 1

    def _units(self, text: str) -> list[Span]:
        units: list[Span] = []
        for start, end in sentence_spans(text):
            if end - start <= self.size:
                units.append((start, end))
            else:
                units.extend(pack_words(text, start, end, self.size))
        return units

    def describe(self) -> str:
        suffix = f"-{self.overlap_sentences}s" if self.overlap_sentences else ""
        return f"sentence-{self.size}{suffix}"


def pack_words(text: str, start: int, end: int, size: int) -> list[Span]:
    """``text[start:end]`` as consecutive pieces of at most ``size`` characters, cut between words
    (a word longer than ``size`` is cut every ``size`` characters)."""
    pieces: list[Span] = []
    for word_start, word_end in non_space_runs(text, start, end):
        if pieces and word_end - pieces[-1][0] <= size:
            pieces[-1] = (pieces[-1][0], word_end)
            continue
        while word_end - word_start > size:
            pieces.append((word_start, word_start + size))
            word_start += size
        pieces.append((word_start, word_end))
    return pieces
