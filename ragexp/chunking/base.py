"""The chunker contract and what every chunker shares: trimming, ids, config validation.

A chunker yields candidate spans ``(start, end, title)`` of a document in document order; the base
class turns them into :class:`~ragexp.datamodel.Chunk` objects such that

- ``chunk.text == doc.text[chunk.start:chunk.end]`` (offsets move, text is never edited);
- no chunk starts or ends with whitespace, none is empty (whitespace is trimmed by moving offsets,
  and spans left empty are dropped);
- starts and ends strictly increase, so no chunk lies inside another: a candidate whose trimmed
  span lies inside the previous chunk is dropped, and a previous chunk lying inside the next one
  (same start) is replaced by it;
- ``chunk.index`` counts 0, 1, 2, ... in document order and ``chunk.id == chunk_id(doc.id, index)``;
- a document whose text is empty or whitespace but which has a title gets one chunk holding only
  the title (``text == ""``, ``start == end == 0``): the title is text, and the document can be
  found by it; a document with neither text nor title gets no chunk (the run reports it).

Every chunker's candidate spans together cover the whole document, so the chunks cover every
non-whitespace character (the property the relevance invariant in ``docs/relevance.md`` needs).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from tqdm import tqdm

from ragexp.chunking.text_units import strip_span
from ragexp.datamodel import Chunk, Document, chunk_id
from ragexp.errors import RagexpInputError

CandidateSpan = tuple[int, int, str]


class Chunker(ABC):
    """Base class of the chunkers; subclasses are frozen dataclasses whose fields are the options."""

    name: ClassVar[str]

    @abstractmethod
    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        """Spans ``(start, end, title)`` in document order, covering the whole of ``doc.text``."""

    @abstractmethod
    def describe(self) -> str:
        """A short readable label for run names, e.g. ``fixed-256c-32``."""

    @property
    def config(self) -> dict[str, Any]:
        """The canonical configuration, every default filled in (cache keys and fingerprints)."""
        options = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"name": self.name} | {key: list(v) if isinstance(v, tuple) else v for key, v in options.items()}

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Chunker:
        """Build from config options (without ``name``); unknown options raise ``RagexpInputError``."""
        valid = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        for key in options:
            if key not in valid:
                listing = ", ".join(valid) if valid else "none"
                raise RagexpInputError(
                    f"unknown option for chunker '{cls.name}'; valid options: {listing}", field=f"chunking.{key}"
                )
        return cls(**options)

    def chunk(self, doc: Document) -> list[Chunk]:
        """The chunks of one document (see the module docstring for the guarantees)."""
        chunks: list[Chunk] = []
        previous_end = 0
        for start, end, title in self.candidate_spans(doc):
            start, end = strip_span(doc.text, start, end)
            if start == end or end <= previous_end:
                continue
            if chunks and start == chunks[-1].start:
                chunks.pop()
            index = len(chunks)
            chunks.append(Chunk(chunk_id(doc.id, index), doc.id, index, start, end, doc.text[start:end], title))
            previous_end = end
        if not chunks and doc.title.strip():
            chunks.append(Chunk(chunk_id(doc.id, 0), doc.id, 0, 0, 0, "", doc.title))
        return chunks

    def chunk_corpus(self, corpus: Mapping[str, Document] | Iterable[Document], progress: bool = False) -> list[Chunk]:
        """The chunks of every document, documents in corpus order."""
        documents = list(corpus.values()) if isinstance(corpus, Mapping) else list(corpus)
        chunks: list[Chunk] = []
        for doc in tqdm(documents, desc=f"chunking ({self.describe()})", unit="doc", disable=not progress):
            chunks.extend(self.chunk(doc))
        return chunks


def require_int(value: Any, option: str, minimum: int) -> None:
    """Raise ``RagexpInputError`` naming ``chunking.<option>`` unless ``value`` is an int >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RagexpInputError(f"must be an integer, got {value!r}", field=f"chunking.{option}")
    if value < minimum:
        raise RagexpInputError(f"must be >= {minimum}, got {value}", field=f"chunking.{option}")


def require_size_and_overlap(size: Any, overlap: Any, size_option: str = "size") -> None:
    """``size >= 1`` and ``0 <= overlap < size``, else ``RagexpInputError`` naming the option."""
    require_int(size, size_option, 1)
    require_int(overlap, "overlap", 0)
    if overlap >= size:
        raise RagexpInputError(
            f"must be smaller than chunking.{size_option} ({size}), got {overlap}", field="chunking.overlap"
        )


def require_choice(value: Any, option: str, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise RagexpInputError(f"must be one of {', '.join(choices)}, got {value!r}", field=f"chunking.{option}")
