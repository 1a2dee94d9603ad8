"""Offset-keeping text units: whitespace trimming, word tokens, sentences, tokenizer boundaries.

Spans are half-open character offsets ``(start, end)`` into the text given; no function edits
text. "Whitespace" means ``str.isspace`` everywhere (the same set ``str.strip`` and the regex class
``\\s`` use), so trimming, word splitting and the chunkers' coverage guarantee agree.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import accumulate, pairwise
from pathlib import Path

from tokenizers import Tokenizer

from ragexp.errors import RagexpInputError
from ragexp.runtime import progress

Span = tuple[int, int]

REGEX_TOKENIZER = "regex"

_WORD_TOKEN = re.compile(r"\w+|[^\w\s]")
_NON_SPACE_RUN = re.compile(r"\S+")

# A candidate sentence end: terminal punctuation plus closing quotes/brackets before whitespace,
# CJK terminal punctuation (no space needed), or any line break.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]»]*(?=\s)|[。！？]+[」』）]*|\n")
_OPENING_PUNCTUATION = "\"'“‘([{«"
# Words that end in "." without ending a sentence (compared lowercased, without the final ".").
ABBREVIATIONS = frozenset(
    """
    e.g i.e cf vs viz al approx ca resp incl esp dept univ est
    mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt hon
    fig figs eq eqs no nos vol vols pp p ch sec ref refs tab ed eds
    jan feb mar apr jun jul aug sep sept oct nov dec
    inc ltd co corp
    """.split()
)


def strip_span(text: str, start: int, end: int) -> Span:
    """``(start, end)`` moved inwards past whitespace; ``start == end`` if only whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def stripped_length(text: str, start: int, end: int) -> int:
    """Length of ``text[start:end]`` without its leading and trailing whitespace."""
    start, end = strip_span(text, start, end)
    return end - start


def word_token_spans(text: str) -> list[Span]:
    """Regex word tokens: runs of word characters, and every other non-space character alone."""
    return [match.span() for match in _WORD_TOKEN.finditer(text)]


def non_space_runs(text: str, start: int, end: int) -> list[Span]:
    """Whitespace-separated words of ``text[start:end]``."""
    return [match.span() for match in _NON_SPACE_RUN.finditer(text, start, end)]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentences of ``text[start:end]``, trimmed, in order, covering every non-space character.

    A sentence ends at a line break, at CJK ``。！？``, or at ``.``/``!``/``?`` (with closing
    quotes/brackets) followed by whitespace -- except a ``.`` whose next word starts lowercase or
    with ``,;:``, a single ``.`` after an abbreviation (``e.g.``, ``Dr.``, ``Fig.``; see
    :data:`ABBREVIATIONS`) or an initial (``J. Smith``), and the number of a list item at the start
    of a line (``1. First``). Decimals such as ``1.5`` never end a sentence (no space follows).
    """
    end = len(text) if end is None else end
    cuts = [start]
    for match in _SENTENCE_END.finditer(text, start, end):
        if _ends_sentence(text, match, start, end):
            cuts.append(match.end())
    cuts.append(end)
    spans = (strip_span(text, a, b) for a, b in pairwise(cuts))
    return [(a, b) for a, b in spans if a < b]


def _ends_sentence(text: str, match: re.Match[str], start: int, end: int) -> bool:
    punctuation = match.group().rstrip("\"'”’)]»")
    if not punctuation.startswith("."):
        return True
    follower = _next_non_space(text, match.end(), end)
    if follower is not None and (follower.islower() or follower in ",;:"):
        return False
    if punctuation != ".":
        return True
    word_start = match.start()
    while word_start > start and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start : match.start()].lstrip(_OPENING_PUNCTUATION).lower()
    if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return False
    return not (word.isdigit() and _starts_line(text, word_start, start))


def _next_non_space(text: str, position: int, end: int) -> str | None:
    while position < end and text[position].isspace():
        position += 1
    return text[position] if position < end else None


def _starts_line(text: str, position: int, start: int) -> bool:
    line_start = max(text.rfind("\n", start, position) + 1, start)
    return not text[line_start:position].strip()


def token_boundaries(text: str, tokenizer: str) -> list[int]:
    """Cut positions ``b`` for token windows: window ``[i, j)`` of tokens covers ``text[b[i]:b[j]]``.

    ``b[0] = 0``, ``b[k]`` = start offset of token ``k`` (0 < k < n), ``b[n] = len(text)``, so the
    windows tile the whole text: characters a tokenizer drops (control characters, zero-width
    joiners) stay inside the window of the token before them. Text without tokens gives ``[0, len]``.
    ``tokenizer`` is ``"regex"`` (:func:`word_token_spans`) or a Hugging Face tokenizer id or path.
    """
    if tokenizer == REGEX_TOKENIZER:
        starts = [start for start, _ in word_token_spans(text)]
    else:
        encoding = load_hf_tokenizer(tokenizer).encode(text, add_special_tokens=False)
        starts = list(accumulate((start for start, _ in encoding.offsets), max))
    return [0, *starts[1:], len(text)]


@lru_cache(maxsize=8)
def load_hf_tokenizer(name_or_path: str) -> Tokenizer:
    """The fast (Rust) tokenizer of a local folder or a Hugging Face id, without truncation or padding.

    A folder with ``tokenizer.json`` is read directly (no network, no ``transformers`` import);
    anything else goes through ``transformers.AutoTokenizer``, which honours ``HF_HUB_OFFLINE``.
    """
    tokenizer_file = Path(name_or_path) / "tokenizer.json"
    try:
        if tokenizer_file.is_file():
            backend = Tokenizer.from_file(str(tokenizer_file))
        else:
            from transformers import AutoTokenizer

            progress.apply_to_libraries()  # transformers is imported now
            loaded = AutoTokenizer.from_pretrained(name_or_path)
            backend = Tokenizer.from_str(loaded.backend_tokenizer.to_str()) if loaded.is_fast else None
    except Exception as err:  # noqa: BLE001 - tokenizers raises plain Exception for unreadable files
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise RagexpInputError(
            f"cannot load tokenizer {name_or_path!r} (a local folder or a Hugging Face id; "
            f"'{REGEX_TOKENIZER}' for regex word tokens): {reason}",
            field="chunking.tokenizer",
        ) from None
    if backend is None:
        raise RagexpInputError(
            f"tokenizer {name_or_path!r} has no fast (Rust) version, so it gives no character offsets",
            field="chunking.tokenizer",
        )
    backend.no_truncation()
    backend.no_padding()
    return backend
