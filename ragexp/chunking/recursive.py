"""``recursive``: LangChain-style recursive splitting on a list of separators, keeping offsets.

The algorithm of LangChain's ``RecursiveCharacterTextSplitter``, on spans instead of strings:

1. pick the first separator that cuts the span (``""`` always cuts: between characters);
2. cut after every occurrence of it (the separator stays at the end of the piece before);
3. pieces of at most ``size`` characters are merged greedily, left to right, into chunks of at
   most ``size`` characters; each next chunk starts with the last pieces of the previous one
   that fit in ``overlap`` characters;
4. a piece longer than ``size`` is split recursively with the separators after the one used
   (without separators left, it stays one chunk: only a separator list without ``""`` allows
   chunks longer than ``size``).

One deviation from LangChain: where the chunks of a long piece meet the merged chunks of its
neighbours, the two chunks at the seam are joined if together they fit in ``size`` (LangChain
leaves e.g. a heading line alone before a long paragraph).

Lengths are those of the trimmed spans, i.e. ``len(chunk.text)``. The separator
``"<sentence>"`` cuts between the sentences of :func:`~ragexp.chunking.text_units.sentence_spans`;
every other separator is a literal string.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ragexp.chunking.base import CandidateSpan, Chunker, require_size_and_overlap
from ragexp.chunking.text_units import Span, sentence_spans, stripped_length
from ragexp.datamodel import Document
from ragexp.errors import RagexpInputError

SENTENCE_SEPARATOR = "<sentence>"
DEFAULT_SEPARATORS = ("\n\n", "\n", SENTENCE_SEPARATOR, " ", "")


@dataclass(frozen=True)
class RecursiveChunker(Chunker):
    """Recursive splitting (module docstring) of the whole document."""

    name: ClassVar[str] = "recursive"
    size: int = 512
    overlap: int = 64
    separators: tuple[str, ...] = DEFAULT_SEPARATORS

    def __post_init__(self) -> None:
        require_size_and_overlap(self.size, self.overlap)
        object.__setattr__(self, "separators", validated_separators(self.separators))

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        for start, end in recursive_split(doc.text, 0, len(doc.text), self.size, self.overlap, self.separators):
            yield start, end, doc.title

    def describe(self) -> str:
        suffix = f"-{self.overlap}" if self.overlap else ""
        return f"recursive-{self.size}{suffix}"


def validated_separators(separators: object) -> tuple[str, ...]:
    """``separators`` as a tuple of strings, or ``RagexpInputError`` naming ``chunking.separators``."""
    if isinstance(separators, str) or not isinstance(separators, Sequence) or not separators:
        raise RagexpInputError(
            f"must be a non-empty list of strings, e.g. {list(DEFAULT_SEPARATORS)}", field="chunking.separators"
        )
    if not all(isinstance(separator, str) for separator in separators):
        raise RagexpInputError(f"every separator must be a string, got {list(separators)}", field="chunking.separators")
    return tuple(separators)


def recursive_split(
    text: str, start: int, end: int, size: int, overlap: int, separators: Sequence[str]
) -> list[Span]:
    """Chunk spans of ``text[start:end]`` (module docstring), in order, covering the whole range."""
    cuts: list[int] = []
    finer: Sequence[str] = ()
    for position, separator in enumerate(separators):
        cuts = _cuts(text, start, end, separator)
        if cuts:
            finer = separators[position + 1 :] if separator else ()
            break
    pieces = list(zip([start, *cuts], [*cuts, end]))
    spans: list[Span] = []
    fitting: list[Span] = []
    for piece in pieces:
        if stripped_length(text, *piece) <= size:
            fitting.append(piece)
            continue
        _extend_joining(text, spans, merge_pieces(text, fitting, size, overlap), size)
        fitting = []
        _extend_joining(text, spans, recursive_split(text, *piece, size, overlap, finer) if finer else [piece], size)
    _extend_joining(text, spans, merge_pieces(text, fitting, size, overlap), size)
    return spans


def _extend_joining(text: str, spans: list[Span], following: list[Span], size: int) -> None:
    """Append ``following`` to ``spans``, joining the two spans where they meet if together they fit."""
    if spans and following and stripped_length(text, spans[-1][0], following[0][1]) <= size:
        spans[-1] = (spans[-1][0], following.pop(0)[1])
    spans.extend(following)


def merge_pieces(text: str, pieces: Sequence[Span], size: int, overlap: int) -> list[Span]:
    """Consecutive pieces merged greedily into spans of at most ``size`` trimmed characters; each
    span after the first starts with the trailing pieces of the previous one that fit in ``overlap``."""
    merged: list[Span] = []
    window: deque[Span] = deque()
    for piece in pieces:
        if window and stripped_length(text, window[0][0], piece[1]) > size:
            merged.append((window[0][0], window[-1][1]))
            while window and (
                stripped_length(text, window[0][0], window[-1][1]) > overlap
                or stripped_length(text, window[0][0], piece[1]) > size
            ):
                window.popleft()
        window.append(piece)
    if window:
        merged.append((window[0][0], window[-1][1]))
    return merged


def _cuts(text: str, start: int, end: int, separator: str) -> list[int]:
    """Positions strictly inside ``(start, end)`` where ``separator`` cuts the span."""
    if separator == "":
        return list(range(start + 1, end))
    if separator == SENTENCE_SEPARATOR:
        return [sentence_start for sentence_start, _ in sentence_spans(text, start, end)[1:]]
    cuts = []
    found = text.find(separator, start, end)
    while found != -1:
        if found + len(separator) < end:
            cuts.append(found + len(separator))
        found = text.find(separator, found + len(separator), end)
    return cuts

