"""Text as a system plausibly rewrote it, with a map back to the original offsets.

:func:`comparable` turns a text into the form two texts are compared in when an exact match
fails: HTML tags, character entities, Markdown markup (``*``, ``_``, backticks, ``#``, ``|``,
``>``, brackets and link targets ``](url)``) and ALL whitespace removed, every remaining
character Unicode NFKC-normalised and case-folded. Removing whitespace entirely (rather than
collapsing it) makes a text whose lines were re-wrapped, joined or split by an HTML stripper
compare equal to the original. ``offsets[i]`` is the offset in the original text of the character
``form[i]`` came from, so a match ``form[s:e]`` is the original span
``[offsets[s], offsets[e - 1] + 1)``.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

#: What is dropped: tags, link targets, entities (decoded, not dropped), markup characters, whitespace.
_DROPPED = re.compile(
    r"<[^<>\n]{0,300}>"  # an HTML tag
    r"|\]\([^()\s]{0,1000}\)"  # a Markdown link target, with the closing bracket before it
    r"|&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"  # a character entity
    r"|[\s*_`#|>\[\]]+"  # Markdown markup characters and whitespace
)
#: Markup, as :data:`_DROPPED` removes it, whitespace aside.
_MARKUP = re.compile(_DROPPED.pattern.replace(r"[\s*_`#|>\[\]]+", r"[*_`#|>\[\]]"))
#: An ellipsis where a system cut a passage short (``...``, ``…`` after NFKC).
_ELLIPSIS_ENDS = re.compile(r"^\.{3,}|\.{3,}$")
#: Markup cut in two by a passage boundary: a link target's tail or a tag's end at the start,
#: a link target's or a tag's beginning at the end. The whole markup is dropped from a document,
#: so its cut piece would keep the passage from matching.
_CUT_MARKUP = re.compile(r"^[^\s()\[\]<>]{0,1000}\)|^[^\s<>]{0,300}>|\]?\([^\s()]{0,1000}$|<[^<>]{0,300}$")


@dataclass(frozen=True)
class Comparable:
    """``form``: the comparable text; ``offsets[i]``: the original offset of ``form[i]``."""

    form: str
    offsets: np.ndarray

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original ``[start, end)`` that ``form[start:end]`` (non-empty) came from."""
        return int(self.offsets[start]), int(self.offsets[end - 1]) + 1


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def comparable(text: str) -> Comparable:
    """``text`` in the comparable form (module docstring), with its offset map."""
    if text.isascii():
        found = _ascii_comparable(text)
        if found is not None:
            return found
    return _any_comparable(text)


def _ascii_comparable(text: str) -> Comparable | None:
    """:func:`comparable` of an ASCII text as one mask over its bytes (the common case, ~20x faster
    than character by character); ``None`` when an entity decodes to more than one character."""
    codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8).copy()
    keep = np.ones(len(codes), dtype=bool)
    for match in _DROPPED.finditer(text):
        start, end = match.span()
        if text[start] == "&":
            decoded = html.unescape(match.group())
            if decoded == match.group():
                continue  # not an entity: kept as written
            folded = "".join(c for c in _fold(decoded) if not c.isspace())
            if len(folded) > 1 or not folded.isascii():
                return None
            if folded:
                codes[start] = ord(folded)
                start += 1
        keep[start:end] = False
    offsets = np.flatnonzero(keep)
    return Comparable(codes[keep].tobytes().decode("ascii").lower(), offsets.astype(np.int64))


def _any_comparable(text: str) -> Comparable:
    pieces: list[str] = []
    offsets: list[np.ndarray] = []

    def keep(segment: str, at: int) -> None:
        if not segment:
            return
        if segment.isascii():
            pieces.append(segment.lower())
            offsets.append(np.arange(at, at + len(segment), dtype=np.int64))
            return
        for i, char in enumerate(segment):
            folded = _fold(char)
            folded = "".join(c for c in folded if not c.isspace())
            if folded:
                pieces.append(folded)
                offsets.append(np.full(len(folded), at + i, dtype=np.int64))

    position = 0
    for match in _DROPPED.finditer(text):
        keep(text[position:match.start()], position)
        token = match.group()
        if token.startswith("&"):
            decoded = html.unescape(token)
            if decoded != token:
                folded = "".join(c for c in _fold(decoded) if not c.isspace())
                if folded:
                    pieces.append(folded)
                    offsets.append(np.full(len(folded), match.start(), dtype=np.int64))
            else:
                keep(token, match.start())
        position = match.end()
    keep(text[position:], position)
    form = "".join(pieces)
    return Comparable(form, np.concatenate(offsets) if offsets else np.zeros(0, dtype=np.int64))


def has_markup(text: str) -> bool:
    """Whether ``text`` holds markup the comparable form removes (tags, entities, Markdown)."""
    return _MARKUP.search(text) is not None


def passage_forms(text: str) -> list[str]:
    """A passage's comparable forms to search, without an ellipsis at either end (a system's
    cut): the whole passage, then (when different) without markup cut at its edges."""
    forms = [_ELLIPSIS_ENDS.sub("", comparable(text).form)]
    trimmed = _CUT_MARKUP.sub("", text.strip())
    if trimmed != text.strip():
        forms.append(_ELLIPSIS_ENDS.sub("", comparable(trimmed).form))
    return [form for form in dict.fromkeys(forms) if form]
