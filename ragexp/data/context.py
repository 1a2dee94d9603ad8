"""The context a generator is shown and a judge judges against: the retrieved chunks as text.

``format_context(chunks)`` numbers the passages ``[1] title`` / text, separated by blank lines
(the title line only if the chunk has one), so the judge sees exactly what the generator saw.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragexp.data.model import Chunk


def format_context(chunks: Sequence[Chunk]) -> str:
    """Numbered passages: ``[i] title\\ntext`` separated by blank lines (title line only if set)."""
    blocks = []
    for number, chunk in enumerate(chunks, start=1):
        heading = f"[{number}] {chunk.title}".rstrip()
        blocks.append(f"{heading}\n{chunk.text.strip()}")
    return "\n\n".join(blocks)
