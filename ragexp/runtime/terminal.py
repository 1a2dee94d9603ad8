"""What ragexp prints to a terminal shows untrusted text as text, never as terminal commands.

A doc id a system sent, a field of a stored file, an answer: any of them may hold an escape
sequence (``ESC [ 2 J`` clears the screen, ``ESC ] 8`` writes a link, ``ESC ] 52`` sets the
clipboard) or a character that reorders or hides the line around it. :func:`install`, called
once by the command line before any command runs, makes standard output write every such
character as its Python escape (``\\x1b``, ``\\u202e``) while it is a terminal; a file or pipe
gets the text unchanged. :func:`escaped` does the same to one string (the one-line error a
refusal prints on standard error, where progress bars draw with their own escape sequences).

Escaped: C0 controls except tab and line feed (carriage return too: it lets a line overwrite
itself), DEL, C1 controls (``U+0080``-``U+009F``: ``U+009B`` is a one-character ``ESC [``), and the
bidirectional embeddings, overrides and isolates (``U+202A``-``U+202E``, ``U+2066``-``U+2069``).
"""

from __future__ import annotations

import sys
from typing import TextIO

_CONTROLS = [*(c for c in range(0x20) if chr(c) not in "\t\n"), 0x7F, *range(0x80, 0xA0),
             *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TABLE = {c: chr(c).encode("unicode_escape").decode("ascii") for c in _CONTROLS}


def escaped(text: str) -> str:
    """``text`` with every terminal control character (module docstring) written as its escape."""
    return text.translate(_TABLE)


class EscapingStream:
    """A text stream that writes :func:`escaped` text to ``stream`` (everything else is ``stream``'s)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(escaped(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def install() -> None:
    """Standard output escapes terminal control characters while it is a terminal (idempotent)."""
    stdout = sys.stdout
    if stdout is not None and not isinstance(stdout, EscapingStream) and stdout.isatty():
        sys.stdout = EscapingStream(stdout)
