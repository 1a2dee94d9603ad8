"""The metadata a framework writes around a passage's text, found so that only the text is placed.

Most pipelines hand their LLM (and so their endpoint) a passage with its metadata before it.
:func:`content_span` returns the ``[start, end)`` of the passage's own text within what the
system sent:

- a configured template (``system.response.template``, :class:`HeaderTemplate`): literal text
  with ``{name}`` placeholders and exactly one ``{content}``, e.g. ``"Title: {title}\\n---\\n{content}"``;
  matched leftmost, each placeholder ending at the first occurrence of the literal after it
  (linear in the passage, no backtracking); a passage it does not match falls through to:
- a leading block of ``key: value`` lines (:data:`KEY_LINE`) followed by a blank line, which is
  LlamaIndex's default (``TextNode.get_content(MetadataMode.LLM | ALL)``: text template
  ``"{metadata_str}\\n\\n{content}"``, metadata template ``"{key}: {value}"``, separator ``"\\n"``)
  and LangChain's ``format_document`` with a ``key: {key}`` prompt;
- ``key: value`` lines whose last key names the content (:data:`CONTENT_KEYS`, any case), the
  text starting after it on that line: ``"Source: refunds.md\\nContent: Annual plans ..."``.

Nothing else is cut. A header is only a hypothesis: the locator places the whole passage
verbatim first, and a cut header the document itself holds right before the placed text is
taken back into the placement (:class:`ragexp.systems.locate.Locator`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragexp.errors import RagexpInputError

#: One ``key: value`` line: a key of at most 40 characters (letters, digits, ``_ . -`` and single spaces).
KEY_LINE = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_.\-]*(?: [A-Za-z0-9_.\-]+){0,4}):(?:[ \t]+(.*))?")
MAX_KEY_CHARS = 40
#: Keys whose value is the passage's text (``Content: ...``).
CONTENT_KEYS = frozenset({"content", "text", "page_content", "passage", "chunk", "body", "context"})
#: A header longer than this many lines is not looked for.
MAX_HEADER_LINES = 50
MAX_TEMPLATE_CHARS = 2000
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
CONTENT = "content"


@dataclass(frozen=True)
class HeaderTemplate:
    """A parsed ``system.response.template``: the pieces before and after ``{content}``, each a
    tuple of literals and placeholders (``None``), two placeholders never side by side."""

    before: tuple[str | None, ...]
    after: tuple[str | None, ...]

    @classmethod
    def parse(cls, template: str, field: str = "system.response.template") -> HeaderTemplate:
        if not isinstance(template, str) or not 0 < len(template) <= MAX_TEMPLATE_CHARS:
            raise RagexpInputError(f"is a template string of at most {MAX_TEMPLATE_CHARS:,} characters such as "
                                   "'Title: {title}\\n\\n{content}'", field=field)
        pieces: list[str | None] = []  # literals, None for a placeholder
        content_at = []
        at = 0
        for match in _PLACEHOLDER.finditer(template):
            if match.start() > at:
                pieces.append(template[at:match.start()])
            elif pieces and (pieces[-1] is None or content_at and content_at[-1] == len(pieces)):
                raise RagexpInputError("needs literal text between two placeholders (else where one ends is unknown)",
                                       field=field)
            if match.group(1) == CONTENT:
                content_at.append(len(pieces))
            else:
                pieces.append(None)
            at = match.end()
        if at < len(template):
            pieces.append(template[at:])
        if len(content_at) != 1:
            raise RagexpInputError("must hold '{content}' (where the passage's own text is) exactly once", field=field)
        split = content_at[0]
        return cls(tuple(pieces[:split]), tuple(pieces[split:]))

    def match(self, text: str) -> tuple[int, int] | None:
        """The content's ``[start, end)`` in ``text``, or ``None`` when the template does not fit."""
        start = _match_forward(self.before, text)
        if start is None:
            return None
        end = _match_backward(self.after, text, start)
        return None if end is None else (start, end)


def _match_forward(pieces: tuple[str | None, ...], text: str) -> int | None:
    """Where the pieces, matched from the start of ``text``, end (a trailing placeholder is not allowed
    before the content, so the last piece is a literal or there is none)."""
    at = 0
    for i, piece in enumerate(pieces):
        if piece is None:
            continue
        if i > 0 and pieces[i - 1] is None:
            found = text.find(piece, at)
            if found < 0:
                return None
            at = found + len(piece)
        elif text.startswith(piece, at):
            at += len(piece)
        else:
            return None
    return at


def _match_backward(pieces: tuple[str | None, ...], text: str, low: int) -> int | None:
    end = len(text)
    for i in range(len(pieces) - 1, -1, -1):
        piece = pieces[i]
        if piece is None:
            continue
        if i + 1 < len(pieces) and pieces[i + 1] is None:
            found = text.rfind(piece, low, end)
            if found < 0:
                return None
            end = found
        elif text.endswith(piece, low, end):
            end -= len(piece)
        else:
            return None
    return end if end >= low else None


def content_span(text: str, template: HeaderTemplate | None = None) -> tuple[int, int]:
    """The ``[start, end)`` of the passage's own text in ``text`` (module docstring); ``(0, len(text))``
    when no header is found."""
    if template is not None:
        found = template.match(text)
        if found is not None:
            return found
    return _key_value_header(text), len(text)


def _key_value_header(text: str) -> int:
    at = 0
    lines = 0
    while lines < MAX_HEADER_LINES:
        newline = text.find("\n", at)
        line = text[at:] if newline < 0 else text[at:newline]
        match = KEY_LINE.fullmatch(line.rstrip("\r"))
        if match is None or len(match.group(1)) > MAX_KEY_CHARS:
            break
        lines += 1
        if match.group(1).lower() in CONTENT_KEYS and match.group(2):
            return at + match.start(2)
        if newline < 0:
            return 0
        at = newline + 1
    if not lines:
        return 0
    rest = text[at:]
    blank = re.match(r"[ \t\r]*\n", rest)
    if blank is None:
        return 0
    body = len(text) - len(rest.lstrip())
    return body if body < len(text) else 0
