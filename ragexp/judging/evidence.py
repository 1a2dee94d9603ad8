"""The part of a judged context a verdict rests on: one sentence, as ``[start, end]`` offsets.

A verdict's ``evidence`` points into the context it was judged against (``judge_context``), so a
reviewer sees what the judge relied on (``ragexp judge review``):

- the lexical judge: the context sentence sharing the most of the claim's content tokens
  (:func:`closest_sentence`; the first on a tie);
- the embedding judge: the context sentence whose cosine to the claim is the score;
- the LLM and local-likelihood judges read the whole document text (:func:`document_text`) and
  name no span: ``None``. The review page then marks the :func:`closest_sentence` by shared words
  and says it is not the judge's.

Sentences are :func:`~ragexp.judging.claims.sentence_spans` of the context's document text
(:func:`document_sentence_spans`): never a ``[1] doc-id > Heading`` label line ragexp puts in
front of each retrieved chunk, so evidence is always a span of what a document says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragexp.data.context import passage_spans
from ragexp.judging.claims import sentence_spans


def document_sentence_spans(context: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of the document text of ``context``
    (:func:`~ragexp.data.context.passage_spans`), in order; label lines are in none of them."""
    return [
        (start + s, start + e)
        for start, end in passage_spans(context)
        for s, e in sentence_spans(context[start:end])
    ]


def document_text(context: str) -> str:
    """The document text of ``context``: its passages without their label lines, separated by
    blank lines. What every judge reads: the labels are ragexp's, not evidence."""
    return "\n\n".join(context[start:end] for start, end in passage_spans(context))


def within_document(context: str, span: Sequence[int]) -> bool:
    """Whether ``[start, end]`` lies inside one passage's document text."""
    return any(start <= span[0] <= span[1] <= end for start, end in passage_spans(context))


def sentence_token_sets(context: str, tokens_of: Callable[[str], set[str]]) -> list[tuple[tuple[int, int], set[str]]]:
    """Each document sentence's span and its token set."""
    return [((start, end), tokens_of(context[start:end])) for start, end in document_sentence_spans(context)]


def closest_sentence(claim_tokens: set[str], sentences: Sequence[tuple[tuple[int, int], set[str]]]) -> list[int] | None:
    """``[start, end]`` of the sentence sharing most of ``claim_tokens`` (the first on a tie);
    ``None`` when no sentence shares one."""
    best, best_overlap = None, 0
    for span, tokens in sentences:
        overlap = len(claim_tokens & tokens)
        if overlap > best_overlap:
            best, best_overlap = span, overlap
    return None if best is None else list(best)
