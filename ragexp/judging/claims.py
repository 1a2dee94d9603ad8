"""Splitting an answer into claims: the unit that faithfulness judges one at a time.

Two splitters, chosen by the judge config's ``claim_splitter``:

- ``sentences`` (:class:`SentenceClaimSplitter`): deterministic; one claim per sentence or list
  item. A sentence ends at ``.``, ``!`` or ``?`` followed by whitespace and an upper-case letter,
  digit, quote or bracket, or at a line break; decimals (``1.5``), versions, host names and the
  usual abbreviations (``e.g.``, ``i.e.``, ``etc.``, ``vs.``) do not end one. List markers
  (``-``, ``*``, ``•``, ``1.``, ``2)``) are stripped. Fragments without a letter or digit are
  dropped, and so are fragments that are nothing but list numbers or citation marks (``1.``,
  ``1. 2.``, ``[6]``: a degenerate answer's markers, which state nothing; a bare ``1`` is an answer
  and stays a claim).
- ``llm`` (:class:`LLMClaimSplitter`): the chat model is asked for one atomic claim per line
  (:data:`CLAIM_SPLIT_PROMPT`). If the call fails or yields no line, the answer is split into
  sentences instead; each fallback is logged and counted in ``fallbacks``.

An empty answer has zero claims with either splitter.
"""

from __future__ import annotations

import logging
import re
from typing import Protocol

from ragexp.llm.base import ChatModel, LLMCallError

logger = logging.getLogger(__name__)

CLAIM_SPLIT_PROMPT = """Break the answer below into short, self-contained factual claims.
Write exactly one claim per line, with no numbering, bullets or commentary.
Each claim must make sense on its own (replace pronouns with what they refer to).

Answer:
{answer}

Claims:
"""

_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "incl.", "cf.", "no.", "min.", "max.", "sec.")
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9`])")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•–]|\d{1,3}[.)])\s+")
_HAS_WORD = re.compile(r"\w")
_ONLY_MARKERS = re.compile(r"(?:(?:\d{1,3}[.)]|\[\d{1,3}\])\s*)+")


class ClaimSplitter(Protocol):
    name: str

    def split(self, answer: str) -> list[str]:
        """The claims of ``answer``, in order; ``[]`` for an empty answer."""


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets into ``text`` of each sentence or list item, by the
    rules of :func:`split_sentences` (which returns ``text[start:end]`` of each)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for raw_line, line in zip(text.splitlines(keepends=True), text.splitlines()):
        line_start, offset = offset, offset + len(raw_line)
        marker = _LIST_MARKER.match(line)
        body_start = marker.end() if marker else 0
        body = line[body_start:]
        lead = len(body) - len(body.lstrip())
        body = body.strip()
        if not body:
            continue
        base = line_start + body_start + lead
        start = 0
        for match in _SENTENCE_END.finditer(body):
            candidate = body[start : match.start()].rstrip()
            if candidate.lower().endswith(_ABBREVIATIONS):
                continue
            spans.append((base + start, base + start + len(candidate)))
            start = match.end()
        rest = body[start:]
        skipped = len(rest) - len(rest.lstrip())
        spans.append((base + start + skipped, base + start + skipped + len(rest.strip())))
    return [(s, e) for s, e in spans if _HAS_WORD.search(text[s:e]) and not _ONLY_MARKERS.fullmatch(text[s:e])]


def split_sentences(answer: str) -> list[str]:
    """Deterministic sentence/list-item split (see the module docstring for the rules)."""
    return [answer[start:end] for start, end in sentence_spans(answer)]


class SentenceClaimSplitter:
    """``claim_splitter: sentences``."""

    name = "sentences"

    def split(self, answer: str) -> list[str]:
        return split_sentences(answer)


def parse_claim_lines(text: str) -> list[str]:
    """One claim per non-empty line of a model's output, list markers stripped."""
    lines = (_LIST_MARKER.sub("", line).strip() for line in text.splitlines())
    return [line for line in lines if _HAS_WORD.search(line)]


class LLMClaimSplitter:
    """``claim_splitter: llm``: ask the chat model for atomic claims, greedy decoding."""

    name = "llm"

    def __init__(self, chat_model: ChatModel, template: str = CLAIM_SPLIT_PROMPT, max_tokens: int = 512) -> None:
        self.chat_model = chat_model
        self.template = template
        self.max_tokens = max_tokens
        self.fallbacks = 0

    def split(self, answer: str) -> list[str]:
        if not answer.strip():
            return []
        try:
            response = self.chat_model.complete(
                self.template.format(answer=answer), max_tokens=self.max_tokens, temperature=0.0
            )
        except LLMCallError as err:
            return self._fallback(answer, f"claim splitting call failed ({err})")
        claims = parse_claim_lines(response.text)
        return claims or self._fallback(answer, "claim splitting returned no claim")

    def _fallback(self, answer: str, reason: str) -> list[str]:
        self.fallbacks += 1
        logger.warning("%s; splitting the answer into sentences instead", reason)
        return split_sentences(answer)


def make_claim_splitter(name: str, chat_model: ChatModel | None = None) -> ClaimSplitter:
    """Build the splitter named by the ``claim_splitter`` config value (``llm`` needs a model)."""
    if name == "sentences":
        return SentenceClaimSplitter()
    if name == "llm":
        if chat_model is None:
            raise ValueError("claim_splitter 'llm' needs a chat model")
        return LLMClaimSplitter(chat_model)
    raise ValueError(f"unknown claim_splitter {name!r} (expected 'llm' or 'sentences')")
