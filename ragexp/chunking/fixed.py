"""``fixed``: windows of ``size`` characters or tokens, consecutive windows sharing ``overlap``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ragexp.chunking.base import (
    CandidateSpan,
    Chunker,
    require_choice,
    require_size_and_overlap,
)
from ragexp.chunking.text_units import (
    REGEX_TOKENIZER,
    load_hf_tokenizer,
    token_boundaries,
)
from ragexp.datamodel import Document
from ragexp.errors import RagexpInputError

UNITS = ("chars", "tokens")


@dataclass(frozen=True)
class FixedSizeChunker(Chunker):
    """Window ``w`` covers units ``[w*step, w*step + size)`` with ``step = size - overlap``; the last
    window ends at the last unit. ``unit="chars"`` counts characters (a window may cut a word);
    ``unit="tokens"`` counts tokens of ``tokenizer`` (``"regex"`` word tokens, or a Hugging Face
    tokenizer id/path) and cuts only at token starts, so no token is split. Windows are then
    trimmed of whitespace, which can make a character window shorter than ``size``, never longer.
    """

    name: ClassVar[str] = "fixed"
    unit: str = "chars"
    size: int = 512
    overlap: int = 64
    tokenizer: str = REGEX_TOKENIZER

    def __post_init__(self) -> None:
        require_choice(self.unit, "unit", UNITS)
        require_size_and_overlap(self.size, self.overlap)
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise RagexpInputError(
                f"must be '{REGEX_TOKENIZER}' or a Hugging Face tokenizer id or path", field="chunking.tokenizer"
            )
        if self.unit == "tokens" and self.tokenizer != REGEX_TOKENIZER:
            load_hf_tokenizer(self.tokenizer)

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        if self.unit == "chars":
            boundaries = range(len(doc.text) + 1)
        else:
            boundaries = token_boundaries(doc.text, self.tokenizer)
        units = len(boundaries) - 1
        step = self.size - self.overlap
        for first in range(0, max(units, 1), step):
            last = min(first + self.size, units)
            yield boundaries[first], boundaries[last], doc.title
            if last == units:
                break

    def describe(self) -> str:
        return f"fixed-{self.size}{self.unit[0]}-{self.overlap}"
