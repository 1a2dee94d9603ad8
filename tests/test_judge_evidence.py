"""Judges see document text, never the ``[i] doc-id > Heading`` labels ragexp puts in front of each
retrieved chunk: evidence spans, the text every judge reads, and the review page's highlight.

Each context here is built so that the label is the best match for the claim: a judge that read
the label would pick it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.data.context import format_context, passage_spans
from ragexp.datamodel import Chunk
from ragexp.evaluation.results import QueryResult
from ragexp.judge_review.sample import EVIDENCE_BY_OVERLAP, review_claims
from ragexp.judging.evidence import document_sentence_spans, document_text
from ragexp.judging.judges import EmbeddingJudge, LexicalJudge, LLMJudge, LocalLikelihoodJudge
from ragexp.llm.base import LLMResponse

CHUNKS = [
    Chunk("net#0", "connecting-to-your-internet-network", 0, 0, 60,
          "Hold the button on the back for ten seconds. The light turns orange.",
          "connecting-to-your-internet-network > Resetting Your Network"),
    Chunk("wifi#0", "wifi", 0, 0, 40, "Open Settings and choose a network to join.", "wifi > Joining"),
]
CONTEXT = format_context(CHUNKS)
CLAIM = "Resetting your internet network."  # every content word is in the first label, none in its text
LABELS = ("[1] connecting-to-your-internet-network > Resetting Your Network", "[2] wifi > Joining")


def test_passage_spans_are_the_chunk_texts() -> None:
    assert [CONTEXT[s:e] for s, e in passage_spans(CONTEXT)] == [chunk.text for chunk in CHUNKS]
    assert document_text(CONTEXT) == "\n\n".join(chunk.text for chunk in CHUNKS)
    assert passage_spans("Plain text, no labels.\n\n[2] not a label") == [(0, 39)]


_line = st.text(st.sampled_from(list("ab .[]12>\n\t")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_line, _line), min_size=1, max_size=4))
def test_passage_spans_invert_format_context(parts) -> None:
    """For any titles and texts whose text holds no ``\\n\\n[i+1]`` of the next label, the
    passages read back are the stripped chunk texts (the documented exception is excluded)."""
    chunks = [Chunk(f"c{i}", "d", i, 0, 1, text, title) for i, (title, text) in enumerate(parts)]
    texts = [chunk.text.strip() for chunk in chunks]
    if any(f"\n\n[{i + 2}]" in text for i, text in enumerate(texts)):
        return
    context = format_context(chunks)
    assert [context[s:e] for s, e in passage_spans(context)] == texts
    assert all(label not in document_text(context) for label in LABELS)


def test_lexical_judge_neither_points_at_nor_counts_a_label() -> None:
    [verdict] = LexicalJudge().judge_claims([CLAIM], CONTEXT)
    # content tokens {reset, internet, network}: only "network" is in a document (the second);
    # the first label holds all three, and they are not support
    assert verdict.supported is False and verdict.score == 1 - 2 / 3
    assert CONTEXT[slice(*verdict.evidence)] == "Open Settings and choose a network to join."
    [verdict] = LexicalJudge().judge_claims(["Reset the network with the button."], CONTEXT)
    assert CONTEXT[slice(*verdict.evidence)] == "Hold the button on the back for ten seconds."


class WordCountEncoder:
    """Cosine = shared-word similarity over a few words; the label shares the most with the claim."""

    identity = {"model": {"name": "word-counts", "weights": "0" * 16}}
    VOCABULARY = ("resetting", "network", "internet", "button", "light", "settings")

    def _encode(self, texts):
        return np.array([[text.lower().count(w) for w in self.VOCABULARY] + [1e-3] for text in texts], dtype=float)

    encode_queries = encode_passages = _encode


def test_embedding_judge_scores_document_sentences_only() -> None:
    [verdict] = EmbeddingJudge(WordCountEncoder()).judge_claims([CLAIM], CONTEXT)
    assert verdict.evidence is not None
    assert CONTEXT[slice(*verdict.evidence)] == "Open Settings and choose a network to join."
    assert verdict.score < 0.6  # the label would have scored ~1.0


class RecordingChat:
    model_id = "recording"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, prompt, *, max_tokens=256, temperature=0.0, stop=None) -> LLMResponse:
        self.prompts.append(prompt)
        return LLMResponse("yes", 1, 1, False, self.model_id, 0.0)


def test_model_judges_read_the_document_text_without_labels() -> None:
    chat = RecordingChat()
    LLMJudge(chat, claim_splitter="sentences").judge_claims([CLAIM], CONTEXT)
    [prompt] = chat.prompts
    assert document_text(CONTEXT) in prompt and not any(label in prompt for label in LABELS)

    class Scorer:
        model_id = "scorer"
        prefixes: list[str] = []

        def logprobs(self, pairs):
            self.prefixes.extend(prefix for prefix, _ in pairs)
            return [0.0] * len(pairs)

    scorer = Scorer()
    LocalLikelihoodJudge(scorer, method="pmi").judge_claims([CLAIM], CONTEXT)
    assert document_text(CONTEXT) in scorer.prefixes[0]
    assert not any(label in prefix for label in LABELS for prefix in scorer.prefixes)


def test_review_page_highlights_document_text_only() -> None:
    """A stored span on a label line (as a run from before could hold) and a verdict without a
    span both get the document sentence sharing most words with the claim."""
    on_label = [0, len(LABELS[0])]
    rows = [{"query_id": "q1", "query": "How to reset network", "answer": CLAIM, "judge_context": CONTEXT,
             "claims": [{"claim": "Resetting the network: hold the button.", "supported": True, "score": 1.0,
                         "raw": "", "evidence": on_label},
                        {"claim": "Resetting the network: hold the button.", "supported": True, "score": None,
                         "raw": "yes", "evidence": None}]}]
    claims = review_claims([QueryResult.from_dict(row) for row in rows])
    for claim in claims:
        assert claim.evidence_by == EVIDENCE_BY_OVERLAP
        assert CONTEXT[slice(*claim.evidence)] == "Hold the button on the back for ten seconds."
    assert all(tuple(claim.evidence) in document_sentence_spans(CONTEXT) for claim in claims)
