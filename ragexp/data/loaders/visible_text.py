"""Quotes in converted documents, located by the text a reader sees rather than its Markdown.

A quote for an HTML, PDF or DOCX document is often copied from the page as a browser, PDF viewer
or Word shows it (no ``**``, no backticks, no table pipes), or written against a Markdown
original of the same page; the converted text may differ from it in markup alone. When such a
quote does not occur verbatim, both it and the document are *projected* to their visible text
and the quote is searched there:

- a Markdown link ``[text](target)`` becomes ``text``;
- a line's leading marker is dropped: heading ``#``s, a list bullet (``-``, ``*``, ``+``, ``•``,
  ``◦``, ``▪``, ``‣``) or number (``1.``, ``1)``), a blockquote ``>``;
- table rule lines (``|---|:--|``) are dropped, ``|`` counts as a space;
- the characters ````` ``, ``*``, ``_`` and ``\\`` are dropped;
- every character is NFKC-normalised (a PDF's ``ﬁ`` ligature reads ``fi``);
- runs of whitespace become one space, none at either end.

A match ``[i, j)`` of the projections maps back to the document span from the character that
produced ``i`` to the one that produced ``j - 1``, inclusive; the usual rules then apply (the
quote must occur once, or ``occurrence`` picks one).
"""

from __future__ import annotations

import re
import unicodedata

_LINE_MARKER = re.compile(r"^[ \t]*(#{1,6}[ \t]+|[-*+\u2022\u25e6\u25aa\u2023][ \t]+|\d{1,3}[.)][ \t]+|>[ \t]?)", re.M)
_TABLE_RULE = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*:?-*:?[ \t]*\|?[ \t]*$", re.M)
_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_DROPPED = frozenset("`*_\\")


def project(text: str) -> tuple[str, list[int]]:
    """``(visible, origin)``: the visible text and, for each of its characters, the offset in
    ``text`` of the character it came from (see the module docstring)."""
    dropped = bytearray(len(text))
    for pattern in (_LINE_MARKER, _TABLE_RULE):
        for match in pattern.finditer(text):
            start, end = match.span(1) if pattern is _LINE_MARKER else match.span()
            dropped[start:end] = b"\x01" * (end - start)
    for match in _LINK.finditer(text):
        dropped[match.start() : match.start(1)] = b"\x01" * (match.start(1) - match.start())
        dropped[match.end(1) : match.end()] = b"\x01" * (match.end() - match.end(1))
    chars: list[str] = []
    origin: list[int] = []
    pending_space = -1  # offset of the whitespace that will become one space, -1 when none
    for offset, char in enumerate(text):
        if dropped[offset] or char in _DROPPED:
            continue
        if char.isspace() or char == "|":
            if pending_space < 0:
                pending_space = offset
            continue
        if pending_space >= 0:
            if chars:
                chars.append(" ")
                origin.append(pending_space)
            pending_space = -1
        normal = char if char.isascii() else unicodedata.normalize("NFKC", char)
        chars.extend(normal)
        origin.extend([offset] * len(normal))
    return "".join(chars), origin


def visible_spans(text: str, quote: str, projected: tuple[str, list[int]] | None = None) -> list[tuple[int, int]]:
    """Spans of ``text`` whose visible text equals the quote's, overlapping ones included, in
    order. ``projected``: :func:`project` of ``text`` when the caller keeps it for several quotes."""
    visible, origin = projected or project(text)
    needle = project(quote)[0]
    if not needle:
        return []
    spans = []
    position = visible.find(needle)
    while position >= 0:
        spans.append((origin[position], origin[position + len(needle) - 1] + 1))
        position = visible.find(needle, position + 1)
    return spans
