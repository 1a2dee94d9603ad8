"""``none``: the whole document is one chunk (BEIR/MTEB comparability: chunk qrels == doc qrels).

``none`` has no size: options of the other chunkers (``chunking.size=256`` in a sweep over
``chunking=none,recursive``) do not apply to it and are ignored with a warning, and a run's
config hash counts the chunker's effective options only, so ``none`` runs once per sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ragexp.chunking.base import CandidateSpan, Chunker
from ragexp.datamodel import Document

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WholeDocumentChunker(Chunker):
    """One chunk per document: its text with leading and trailing whitespace trimmed."""

    name: ClassVar[str] = "none"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Chunker:
        if options:
            ignored = ", ".join(f"chunking.{key}={value}" for key, value in options.items())
            log.warning("chunking 'none' keeps every document whole and has no size: ignoring %s", ignored)
        return cls()

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        yield 0, len(doc.text), doc.title

    def describe(self) -> str:
        return "none"
