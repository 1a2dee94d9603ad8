"""Where a generated answer ends: when it starts repeating itself, and at its last whole sentence.

A small model that has said what it knows often says it again, to the token cap ("4. Select the
network you want to reset. 5. Select the network you want to reset. 6. ..."). Two rules find
the first repetition in a growing answer (:func:`repetition_start`), both on complete words
only (a word counts once whitespace follows it, so a half-made word never matches):

- **n-gram**: the newest ``n`` words occurred before, in the same order, anywhere earlier in the
  answer (the occurrences may overlap): the repetition starts at the first of those ``n`` words.
  Any loop, with or without sentence ends, is caught ``n`` words into its second round.
- **sentence**: a sentence just ended (``.``, ``!`` or ``?`` and whitespace, or a line break)
  equals an earlier sentence of the answer, compared lower-cased with spacing, list markers
  (``-``, ``*``, ``•``, ``4.``, ``4)``) and its end mark ignored (a copy that lacks its ``.``
  still repeats): the repetition starts where the later one does.

Words are compared with list markers left out too (a marker word first on its line or after a
sentence end), so numbered copies (``4. X`` / ``5. X``) match. That leaves the loops with no word
at all to the third rule, :func:`degeneration_start` (degeneration: the model emits markers or one
token over and over, e.g. ``1. 1. 1. 1. ...``):

- **markers**: :data:`MARKER_RUN` list or citation markers (``-``, ``*``, ``•``, ``4.``, ``4)``,
  ``#``, ``[4]``) in a row with nothing else between them; the answer keeps the text before them;
- **word**: one word :data:`WORD_RUN` times in a row, list markers between them not counted
  (``the the the the``, ``2. 5.0.0 3. 5.0.0 4. 5.0.0 5. 5.0.0``); the answer keeps the first;
- **token**: a piece of 1 to 4 characters, not all digits, :data:`TOKEN_RUN` times back to back
  inside one word (``!!!!!!!!``, ``1.1.1.1.1.1.1.1.``; ``100000000`` is a number, not a loop);
  the answer keeps the first piece.

Each counts complete words only.
The answer keeps the text before the repetition. :func:`end_at_sentence` then cuts a cut-off
answer (a repetition, or the token cap) after its last whole sentence, so it ends where the
answer ends rather than mid-sentence or on a dangling list number.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\S+(?=\s)")
_LIST_MARKER = re.compile(r"(?:[-*•–]|\d{1,3}[.)])$")
_SENTENCE_END = re.compile(r"(?:[.!?][\"')\]]*(?=\s)|\n)")
_LEADING_MARKER = re.compile(r"^\s*(?:(?:[-*•–]|\d{1,3}[.)])\s+)*")
_LAST_SENTENCE = re.compile(r"[.!?][\"')\]]*(?=\s|$)")
_TRAILING_MARKER = re.compile(r"(?:^|\n|[.!?:][\"')\]]*\s)\s*(?:[-*•–]|\d{1,3}[.)])$")
RULES_VERSION = 4
"""Part of a local model's call-cache key with ``repeat_ngram``: an answer cut by older rules is not reused
(version 2 added the degeneration rule, 3 citation markers and word runs across list markers, 4 the
answer's end checked after a stop string too, its last sentence ended by a line break)."""
MARKER_RUN = 3
"""List markers in a row (nothing between them) that make a degenerate answer."""
WORD_RUN = 4
"""Times one word in a row that make a degenerate answer."""
TOKEN_RUN = 8
"""Times a short piece back to back inside one word that make a degenerate answer."""
_MARKER_RUN = re.compile(r"(?<!\S)(?:(?:[-*•–]|\d{1,3}[.)]|#{1,6}|\[\d{1,3}\])\s+){%d,}" % MARKER_RUN)
_TOKEN_RUN = re.compile(r"(\S{1,4}?)\1{%d,}(?=\S*\s)" % (TOKEN_RUN - 1))


def _words(text: str) -> list[tuple[str, int]]:
    """Complete words (followed by whitespace), lower-cased, with offsets; list markers (a marker
    word first on its line or after a sentence end, as in ``done. 5. Open``) left out."""
    out, previous, previous_end = [], "", 0
    for match in _WORD.finditer(text):
        word = match.group()
        starts_item = not previous or "\n" in text[previous_end : match.start()] or previous[-1] in ".!?:"
        if not (starts_item and _LIST_MARKER.fullmatch(word)):
            out.append((word.lower(), match.start()))
        previous, previous_end = word, match.end()
    return out


def ngram_repeat_start(text: str, n: int) -> int | None:
    """Offset of the newest ``n`` complete words when they occurred before in ``text``, else ``None``."""
    words = _words(text)
    if len(words) <= n:
        return None
    newest = tuple(word for word, _ in words[-n:])
    earlier = {tuple(word for word, _ in words[i : i + n]) for i in range(len(words) - n)}
    return words[-n][1] if newest in earlier else None


def _sentences(text: str) -> list[tuple[str, int]]:
    """Each ended sentence's normalised text (see the module docstring) and where it starts."""
    out, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        piece = text[start : match.end()]
        body = " ".join(_LEADING_MARKER.sub("", piece).lower().split()).rstrip(".!?").rstrip()
        if any(ch.isalpha() for ch in body):
            out.append((body, start + len(piece) - len(piece.lstrip())))
        start = match.end()
    return out


def sentence_repeat_start(text: str) -> int | None:
    """Offset of the newest ended sentence of ``text`` when an earlier one equals it, else ``None``."""
    sentences = _sentences(text)
    if len(sentences) < 2:
        return None
    newest, at = sentences[-1]
    return at if any(body == newest for body, _ in sentences[:-1]) else None


def most_repeated_sentence(answer: str) -> int:
    """How many times the answer's most frequent sentence occurs (normalised as above; the last
    sentence counts without an end mark); 0 for an answer without a sentence."""
    counts: dict[str, int] = {}
    for body, _ in _sentences(answer.rstrip() + "\n"):
        counts[body] = counts.get(body, 0) + 1
    return max(counts.values(), default=0)


def _word_run_start(text: str) -> int | None:
    """Offset of the second word of the first run of :data:`WORD_RUN` equal words (list markers left out)."""
    words = _words(text)
    for i in range(len(words) - WORD_RUN + 1):
        if all(words[i + j][0] == words[i][0] for j in range(1, WORD_RUN)):
            return words[i + 1][1]
    return None


def degeneration_start(text: str) -> int | None:
    """Where ``text`` degenerated into markers, one word or one short piece over and over (module
    docstring): the earliest cut of the three rules, else ``None``."""
    markers = _MARKER_RUN.search(text)
    found = [at for at in (markers.start() if markers else None, _word_run_start(text)) if at is not None]
    found += [m.start() + len(m.group(1)) for m in _TOKEN_RUN.finditer(text) if not m.group(1).isdigit()][:1]
    return min(found) if found else None


def repetition_start(text: str, n: int) -> int | None:
    """Where ``text`` started repeating itself by any rule (the earliest offset), else ``None``."""
    found = [at for at in (ngram_repeat_start(text, n), sentence_repeat_start(text), degeneration_start(text))
             if at is not None]
    return min(found) if found else None


def end_at_sentence(text: str) -> str:
    """``text`` up to and including its last sentence end (``.``, ``!``, ``?``, closing quotes or
    brackets kept) that is not a list number (``4.`` first on its line or after a sentence end);
    without one, the whole ``text`` stripped, a trailing list marker dropped."""
    text = text.strip()
    ends = [m.end() for m in _LAST_SENTENCE.finditer(text) if not _TRAILING_MARKER.search(text[: m.start() + 1])]
    if ends:
        return text[: ends[-1]]
    return _TRAILING_MARKER.sub("", text).rstrip()


def final_cut(text: str, stops: list[str], repeat_ngram: int | None, finish_reason: str) -> tuple[str, str]:
    """A finished answer and why it ended: ``text`` cut before the first of ``stops``, then (with
    ``repeat_ngram``) before a repetition by any rule (``repetition`` or ``degenerate``). The end is
    checked as if a line break followed it, so its last words count and its last sentence counts as
    ended without an end mark (``A. B. A`` at the end-of-turn token; ``A. B. A.`` cut at a stop
    string: both repeat ``A``)."""
    answer = text
    for marker in stops:
        answer = answer.split(marker, 1)[0]
    if repeat_ngram is not None:
        at = repetition_start(answer + "\n", repeat_ngram)
        if at is not None:
            return answer[:at], "degenerate" if degeneration_start(answer + "\n") == at else "repetition"
    return answer, finish_reason
