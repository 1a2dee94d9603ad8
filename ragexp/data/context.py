"""The context a generator is shown and a judge judges against: the retrieved chunks as text.

``format_context(chunks)`` numbers the passages ``[1] title`` / text, separated by blank lines
(the title line only if the chunk has one; line breaks in a title become spaces, so the label is
one line), so the judge sees exactly what the generator saw. The title is the chunk's heading path
(``Refund policy > Annual plans``) with a part that repeats the one before it left out
(:func:`label_title`): a document whose title is its first heading would read ``Refund policy >
Refund policy > Annual plans``.

The label lines are ragexp's, not the documents': :func:`passage_spans` finds the document text
of each passage again, so evidence a judge or the review page points at is document text only, and
:func:`strip_label_copies` takes out of an answer the lines a model copied from them (a small model
answers "[1] Proration > Prration > Downgrades"): they are not claims about the documents.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from ragexp.datamodel import Chunk

_FIRST_LABEL = re.compile(r"\[1\][^\n]*\n")
#: How a heading path's parts are joined in a chunk title (``ragexp.chunking.markdown``).
TITLE_PARTS = re.compile(r"\s+[>›»]\s+")
_NUMBER_MARK = re.compile(r"^\[(\d{1,3})\]\s*")
_ANSWER_LIST_MARK = re.compile(r"^\s*(?:[-*•–]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"^[*_`]+|[*_`]+$")
COPY_RULES_VERSION = 3
"""Part of a run's judge-cache key (:mod:`ragexp.evaluation.generation_step`): verdicts on answers
and claims cleaned by older rules are not reused (2: section titles however listed, claims that are
titles). Stripping runs after the model call, so the model's call cache holds uncleaned answers."""
#: Two title texts this similar (difflib ratio, case and spacing ignored) are the same label
#: (a small model misspells what it copies: "Prration").
SAME_LABEL = 0.85


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def _similar(a: str, b: str) -> bool:
    """At least :data:`SAME_LABEL` of the LONGER text matches the other (a copy with a typo), not
    ``difflib``'s ratio ``2M / (len a + len b)``: that passed a long label with a short statement
    after it (``<72-character path> It is done in two steps.``, ratio 0.85) as a copy."""
    left, right = _key(a), _key(b)
    matched = sum(block.size for block in difflib.SequenceMatcher(None, left, right, autojunk=False).get_matching_blocks())
    return matched >= SAME_LABEL * max(len(left), len(right), 1)


def _title_parts(title: str) -> list[str]:
    """A heading path's parts, one line, a part that repeats the part before it left out."""
    parts: list[str] = []
    for part in TITLE_PARTS.split(" ".join(title.split())):
        if part and not (parts and _similar(parts[-1], part)):
            parts.append(part)
    return parts


def label_title(title: str) -> str:
    """The title as a label line shows it (module docstring): ``A > A > B`` -> ``A > B``."""
    return " > ".join(_title_parts(title))


def format_context(chunks: Sequence[Chunk]) -> str:
    """Numbered passages: ``[i] title\\ntext`` separated by blank lines (title line only if set)."""
    blocks = []
    for number, chunk in enumerate(chunks, start=1):
        heading = f"[{number}] {label_title(chunk.title)}".rstrip()
        blocks.append(f"{heading}\n{chunk.text.strip()}")
    return "\n\n".join(blocks)


def context_labels(context: str) -> list[str]:
    """The title of each passage's label line in a context :func:`format_context` wrote (``""``
    for a label without a title); ``[]`` for any other text."""
    spans = passage_spans(context)
    if _FIRST_LABEL.match(context) is None:
        return []
    label_starts = [0] + [end + 2 for _, end in spans[:-1]]
    return [context[at : start - 1].split("]", 1)[1].strip() for at, (start, _) in zip(label_starts, spans)]


def _runs(parts: list[str], shortest: int) -> list[str]:
    """Every run of consecutive ``parts`` of at least ``shortest`` parts, joined as a title."""
    return [" > ".join(parts[i:j]) for i in range(len(parts)) for j in range(i + shortest, len(parts) + 1)]


_HEADING_LINE = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
_ANCHOR_LINK = re.compile(r"^\[([^\]\n]+)\]\(#[^)\s]*\)$")
_TITLE_END = re.compile(r"[\s:.;,]+$")
MIN_TITLE_CHARS = 3
FUZZY_TITLE_CHARS = 16
"""A title at least this long is recognised misspelled too (:func:`_same_title`)."""
"""A title shorter than this (``A``, ``Q&``) is never taken for a copy: too short to tell."""


def context_titles(context: str) -> list[str]:
    """The section titles a context shows: every part of each label line's title (``Proration >
    Downgrades`` gives ``Proration`` and ``Downgrades``) and every Markdown heading line inside its
    passages (``### `EventSource```), each once, in order; ``[]`` for a context without labels."""
    labels = context_labels(context)
    titles = [part for label in labels for part in TITLE_PARTS.split(" ".join(label.split()))]
    if labels:
        titles += [m.group(1) for start, end in passage_spans(context) for m in _HEADING_LINE.finditer(context[start:end])]
    return list(dict.fromkeys(title for title in (_bare(t) for t in titles) if len(title) >= MIN_TITLE_CHARS))


def _bare(text: str) -> str:
    """``text`` as a title reads without its listing: list marker, heading ``#``s, Markdown
    emphasis, an anchor link's target (``[Usage](#usage)``) and trailing ``:``/``.`` left out."""
    text = _ANSWER_LIST_MARK.sub("", text.strip())
    text = _HEADING_MARK.sub("", text)
    link = _ANCHOR_LINK.match(text)
    text = link.group(1) if link else text
    return _EMPHASIS.sub("", _TITLE_END.sub("", _EMPHASIS.sub("", text))).strip()


def is_title_copy(text: str, context: str) -> bool:
    """Whether ``text`` (a line or a claim) is nothing but a section title of ``context``
    (:func:`context_titles`) however it is listed: ``1. Downgrades``, ``- Downgrades``,
    ``**Downgrades**``, ``### Downgrades``, ``[Downgrades](#downgrades)``, ``Downgrades:``, or a
    heading path of them (``Proration > Downgrades``), in the same words (a long title also up to
    :data:`SAME_LABEL` similarity: :func:`_same_title`).
    A title states nothing about the documents, so it is no claim."""
    titles = context_titles(context)
    body = _bare(text)
    if not titles or len(body) < MIN_TITLE_CHARS:
        return False
    parts = [_bare(part) for part in TITLE_PARTS.split(body)]
    return all(any(_same_title(part, title) for title in titles) for part in parts)


def _words_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _same_title(text: str, title: str) -> bool:
    """The same words (case and punctuation ignored); a title of :data:`FUZZY_TITLE_CHARS` or more
    also when :data:`SAME_LABEL` similar (a copied misspelling), a shorter one never (``A
    downgrade`` is not the title ``Downgrades``)."""
    key = _words_key(text)
    return bool(key) and (key == _words_key(title) or (len(title) >= FUZZY_TITLE_CHARS and _similar(text, title)))


def _copies_label(line: str, labels: Sequence[str]) -> bool:
    """Whether an answer line is a copy of a label line (see :func:`strip_label_copies`)."""
    numbered = _NUMBER_MARK.match(line)
    rest = _EMPHASIS.sub("", line[numbered.end():] if numbered else line).strip()
    if numbered and not int(numbered.group(1)) <= len(labels):
        return False
    if numbered and not rest:
        return True
    raw = TITLE_PARTS.split(rest)
    if not numbered and len(raw) < 2:  # a heading alone is document text ("Annual plans")
        return False
    forms = {" > ".join(raw), " > ".join(_title_parts(rest))}
    for label in labels:
        label_raw = TITLE_PARTS.split(" ".join(label.split()))
        runs = _runs(label_raw, 1) + _runs(_title_parts(label), 1)
        if any(_similar(form, run) for form in forms for run in runs):
            return True
    return False


def strip_label_copies(answer: str, context: str) -> tuple[str, int]:
    """``answer`` without the lines that copy a label line or a section title of ``context``, and
    how many there were.

    A line (a list marker and Markdown emphasis around it ignored) copies a label when it is
    ``[i]`` alone for a passage number ``i`` of the context, ``[i]`` followed by a label's title or
    a run of its parts (``[4] Downgrading`` for ``[4] Proration > Downgrading``), or, without
    ``[i]``, a heading path (two parts or more joined by ``>``) that is a label's title or a run of
    its parts. Titles are compared as written and with a part that repeats the one before it left
    out, equal up to :data:`SAME_LABEL` similarity (a copied ``Prration``). A line that is nothing
    but a section title (:func:`is_title_copy`: a label's part or a heading of a passage, however
    listed) is a copy too, unless it is the whole answer written plainly (``Annual plans`` alone,
    without a list marker, ``#`` or emphasis, may answer the question in the heading's words). A
    line that says anything beyond the title stays. Any other context (no label lines) removes
    nothing."""
    labels = context_labels(context)
    if not labels or not answer:
        return answer, 0
    lines = answer.split("\n")
    several = sum(bool(line.strip()) for line in lines) > 1
    kept, removed = [], 0
    for line in lines:
        body = _ANSWER_LIST_MARK.sub("", line).strip()
        listed = several or body != line.strip() or _bare(line) != line.strip()
        if body and (_copies_label(body, labels) or (listed and is_title_copy(line, context))):
            removed += 1
        else:
            kept.append(line)
    return ("\n".join(kept).strip(), removed) if removed else (answer, 0)


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
