"""Why an eval-set quote was not found in its document: the hint added to the error.

Checked in this order, the first that explains it wins:

1. line ends: the quote occurs once ``\\r\\n`` and ``\\r`` are read as ``\\n`` (a file saved on Windows);
2. Unicode normalisation: it occurs once both are NFC-normalised (``é`` as one code point in one,
   ``e`` + combining accent, NFD, in the other);
3. case: it occurs ignoring case;
4. whitespace: it occurs once runs of whitespace are collapsed to one space;
5. a near match: the passage most similar to the quote (``difflib`` ratio >= :data:`NEAR_MATCH_RATIO`),
   searched around the occurrences of the quote's longest words, with its offset and line.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from difflib import SequenceMatcher

NEAR_MATCH_RATIO = 0.75
_ANCHOR_WORDS = 3
_CANDIDATES_PER_WORD = 200


def quote_hint(text: str, quote: str) -> str:
    """A parenthesised hint (with a leading space) explaining why ``quote`` is not in ``text``, or ``""``."""
    if ("\r" in quote or "\r" in text) and _lf(quote) in _lf(text):
        where = "the quote has CRLF (\\r\\n) line ends and the document not" if "\r" in quote else (
            "the document has CRLF (\\r\\n) line ends and the quote not")
        return f" (it occurs once line ends are normalised: {where}; copy the quote with the document's line ends)"
    if unicodedata.normalize("NFC", quote) in unicodedata.normalize("NFC", text):
        return (" (it occurs after Unicode NFC normalisation: the quote and the document encode accented letters "
                "differently, composed (NFC) in one and decomposed (NFD) in the other; save both as NFC)")
    if quote.casefold() in text.casefold():
        return " (it does occur ignoring case)"
    if " ".join(quote.split()) in " ".join(text.split()):
        return " (it occurs once runs of whitespace are collapsed: line breaks or double spaces differ)"
    near = near_match(text, quote)
    if near is None:
        return ""
    ratio, start = near
    line = text.count("\n", 0, start) + 1
    passage = json.dumps(text[start : start + len(quote)][:80], ensure_ascii=False)
    return f" (closest passage, {ratio:.0%} similar, at offset {start}, line {line}: {passage})"


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def near_match(text: str, quote: str) -> tuple[float, int] | None:
    """``(similarity, offset)`` of the passage of ``text`` most like ``quote``, when similar enough."""
    words = sorted(set(re.findall(r"\w{4,}", quote)), key=len, reverse=True)[:_ANCHOR_WORDS]
    best: tuple[float, int] | None = None
    for word in words:
        in_quote = quote.find(word)
        for match in itertools.islice(re.finditer(re.escape(word), text), _CANDIDATES_PER_WORD):
            start = max(0, match.start() - in_quote)
            ratio = SequenceMatcher(None, quote, text[start : start + len(quote)], autojunk=False).ratio()
            if best is None or ratio > best[0]:
                best = (ratio, start)
    return best if best is not None and best[0] >= NEAR_MATCH_RATIO else None
