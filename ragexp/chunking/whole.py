"""``none``: the whole document is one chunk (BEIR/MTEB comparability: chunk qrels == doc qrels)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ragexp.chunking.base import CandidateSpan, Chunker
from ragexp.data import Document


@dataclass(frozen=True)
class WholeDocumentChunker(Chunker):
    """One chunk per document: its text with leading and trailing whitespace trimmed."""

    name: ClassVar[str] = "none"

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        yield 0, len(doc.text), doc.title

    def describe(self) -> str:
        return "none"
