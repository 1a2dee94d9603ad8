"""``markdown``: one chunk per section under an ATX heading, heading path in the chunk title.

- A section is a heading line (``#`` .. ``######``, up to 3 spaces of indent; lines inside
  ````` or ``~~~`` fences are never headings) plus everything up to the next heading; text before
  the first heading is a section with an empty heading path. Setext headings are not recognised.
- Sections shorter than ``min_size`` characters merge into the next section (a trailing short
  section merges into the previous one when the result fits in ``max_size``).
- A (merged) section longer than ``max_size`` is split by the recursive splitter of
  :mod:`ragexp.chunking.recursive` with ``max_size``, ``overlap`` and ``separators``; paragraphs
  come first, so tables and lists (no blank lines inside) stay whole when they fit.
- ``chunk.title = doc.title + " > " + " > ".join(heading path)`` (empty parts left out); the path
  of merged sections is their common leading part (``# A`` merged into ``## B`` gives ``A``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ragexp.chunking.base import (
    CandidateSpan,
    Chunker,
    require_int,
    require_size_and_overlap,
)
from ragexp.chunking.recursive import (
    DEFAULT_SEPARATORS,
    recursive_split,
    validated_separators,
)
from ragexp.chunking.text_units import stripped_length
from ragexp.datamodel import Document
from ragexp.errors import RagexpInputError

HeadingPath = tuple[str, ...]
Section = tuple[int, int, HeadingPath]

TITLE_JOINER = " > "
_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?=[ \t\r]|$)[ \t]*(.*?)(?:[ \t]+#+)?[ \t\r]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class MarkdownChunker(Chunker):
    """Markdown sections (module docstring) as chunks."""

    name: ClassVar[str] = "markdown"
    max_size: int = 1024
    min_size: int = 64
    overlap: int = 0
    separators: tuple[str, ...] = DEFAULT_SEPARATORS

    def __post_init__(self) -> None:
        require_size_and_overlap(self.max_size, self.overlap, size_option="max_size")
        require_int(self.min_size, "min_size", 0)
        if self.min_size > self.max_size:
            raise RagexpInputError(
                f"must not exceed chunking.max_size ({self.max_size}), got {self.min_size}", field="chunking.min_size"
            )
        object.__setattr__(self, "separators", validated_separators(self.separators))

    def candidate_spans(self, doc: Document) -> Iterator[CandidateSpan]:
        text = doc.text
        for start, end, path in self._merged_sections(text):
            title = TITLE_JOINER.join(part for part in (doc.title, *path) if part)
            if stripped_length(text, start, end) <= self.max_size:
                yield start, end, title
                continue
            for piece_start, piece_end in recursive_split(
                text, start, end, self.max_size, self.overlap, self.separators
            ):
                yield piece_start, piece_end, title

    def _merged_sections(self, text: str) -> list[Section]:
        merged: list[tuple[int, int, list[HeadingPath]]] = []
        pending: tuple[int, list[HeadingPath]] | None = None
        for start, end, path in markdown_sections(text):
            if stripped_length(text, start, end) == 0:
                continue
            if pending is not None:
                start, paths = pending[0], [*pending[1], path]
            else:
                paths = [path]
            pending = None
            if stripped_length(text, start, end) < self.min_size:
                pending = (start, paths)
                continue
            merged.append((start, end, paths))
        if pending is not None:
            start, paths = pending
            if merged and stripped_length(text, merged[-1][0], len(text)) <= self.max_size:
                start, paths = merged[-1][0], merged.pop()[2] + paths
            merged.append((start, len(text), paths))
        return [(start, end, common_prefix(paths)) for start, end, paths in merged]

    def describe(self) -> str:
        suffix = f"-{self.overlap}" if self.overlap else ""
        return f"markdown-{self.max_size}{suffix}"


def markdown_sections(text: str) -> list[Section]:
    """``(start, end, heading path)`` of every section, in order, tiling ``text`` exactly."""
    starts: list[tuple[int, HeadingPath]] = [(0, ())]
    open_headings: list[tuple[int, str]] = []
    fence: str | None = None
    line_start = 0
    for line in text.split("\n"):
        fence_match = _FENCE.match(line)
        if fence is not None:
            marker = fence_match.group(1) if fence_match else ""
            if marker.startswith(fence) and not line[fence_match.end() :].strip():
                fence = None
        elif fence_match:
            fence = fence_match.group(1)
        elif heading := _ATX_HEADING.match(line):
            level = len(heading.group(1))
            while open_headings and open_headings[-1][0] >= level:
                open_headings.pop()
            open_headings.append((level, heading.group(2).strip()))
            starts.append((line_start, tuple(title for _, title in open_headings)))
        line_start += len(line) + 1
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return [(start, end, path) for (start, path), end in zip(starts, ends) if start < end]


def common_prefix(paths: Sequence[HeadingPath]) -> HeadingPath:
    """The longest heading path every path in ``paths`` starts with."""
    prefix = paths[0]
    for path in paths[1:]:
        length = 0
        while length < min(len(prefix), len(path)) and prefix[length] == path[length]:
            length += 1
        prefix = prefix[:length]
    return prefix
