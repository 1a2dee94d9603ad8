"""The context a generator is shown and a judge judges against: the retrieved chunks as text.

``format_context(chunks)`` numbers the passages ``[1] title`` / text, separated by blank lines
(the title line only if the chunk has one; line breaks in a title become spaces, so the label is
one line), so the judge sees exactly what the generator saw.

The label lines are ragexp's, not the documents': :func:`passage_spans` finds the document text
of each passage again, so evidence a judge or the review page points at is document text only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragexp.data.model import Chunk

_FIRST_LABEL = re.compile(r"\[1\][^\n]*\n")


def format_context(chunks: Sequence[Chunk]) -> str:
    """Numbered passages: ``[i] title\\ntext`` separated by blank lines (title line only if set)."""
    blocks = []
    for number, chunk in enumerate(chunks, start=1):
        heading = f"[{number}] {' '.join(chunk.title.splitlines())}".rstrip()
        blocks.append(f"{heading}\n{chunk.text.strip()}")
    return "\n\n".join(blocks)


def passage_spans(context: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each passage's document text in ``context``, label lines left out.

    A context written by :func:`format_context` starts with the line ``[1] ...``; passage ``i``'s
    text runs from after its label line to the ``\\n\\n[i+1]`` label that follows (or the end).
    Any other text (a labels file's context, a calibration set's) is one passage: all of it.
    Only a chunk whose own text holds a blank line followed by the next passage's label line
    (``[i+1] ...``) would be cut there."""
    first = _FIRST_LABEL.match(context)
    if first is None:
        return [(0, len(context))]
    spans, number, start = [], 1, first.end()
    while True:
        number += 1
        at = context.find(f"\n\n[{number}]", start)
        label_end = context.find("\n", at + 2) if at >= 0 else -1
        if label_end < 0:
            spans.append((start, len(context)))
            return spans
        spans.append((start, at))
        start = label_end + 1
