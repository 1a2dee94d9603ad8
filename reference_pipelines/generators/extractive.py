"""An answer without a language model: the context sentences that best match the query.

The chunks it is given (the first ``context_k`` when set) are split into sentences (at line breaks and after ``.``, ``!``,
``?`` followed by white space). Terms come from the BM25 tokenizer (lowercase, stopwords out,
Snowball stems). Each sentence ``s`` is scored against the query terms ``Q`` with BM25 over the
sentence pool (``N`` sentences, average length ``avgdl``)::

    score(s) = sum_{t in Q} idf(t) * tf(t,s) * (k1 + 1) / (tf(t,s) + k1 * (1 - b + b * |s| / avgdl))
    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

With an ``encoder`` the score is instead the cosine of the query and sentence embeddings.
The ``top_sentences`` best sentences (ties: earlier first) that share at least one query term
(or, with an encoder, reach ``min_similarity``) form the answer, best first. The
generator refuses with :data:`~reference_pipelines.generators.base.REFUSAL_ANSWER` when the
best sentence's query-term coverage ``|Q ∩ terms(s)| / |Q|`` is below ``min_overlap`` (with an
encoder: when its cosine is below ``min_similarity``). Deterministic for fixed inputs.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragexp.data.context import format_context
from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.text.tokenize import Tokenizer
from reference_pipelines.encoders import Encoder, build_encoder, unit_rows
from reference_pipelines.generators.base import (
    REFUSAL_ANSWER,
    Generation,
)

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    return [piece.strip() for piece in SENTENCE_END.split(text) if piece.strip()]


class ExtractiveGenerator:
    def __init__(
        self,
        top_sentences: int = 2,
        context_k: int | None = None,
        min_overlap: float = 0.5,
        min_similarity: float = 0.35,
        k1: float = 1.2,
        b: float = 0.75,
        encoder: Mapping[str, Any] | Encoder | None = None,
        tokenizer: Mapping[str, Any] | None = None,
    ) -> None:
        if top_sentences < 1:
            raise RagexpInputError(f"must be >= 1, got {top_sentences}", field="top_sentences")
        if context_k is not None and context_k < 1:
            raise RagexpInputError(f"must be >= 1, got {context_k}", field="context_k")
        if not 0.0 <= min_overlap <= 1.0:
            raise RagexpInputError(f"must be within [0, 1], got {min_overlap}", field="min_overlap")
        self.top_sentences = int(top_sentences)
        self.context_k = None if context_k is None else int(context_k)
        self.min_overlap = float(min_overlap)
        self.min_similarity = float(min_similarity)
        self.k1 = float(k1)
        self.b = float(b)
        self.encoder = build_encoder(encoder) if encoder is not None else None
        self.tokenizer = Tokenizer(**(tokenizer or {}))
        self.model_id = "extractive-bm25" if self.encoder is None else "extractive-embedding"

    @property
    def params(self) -> dict[str, Any]:
        return {
            "type": "extractive",
            "top_sentences": self.top_sentences,
            "context_k": self.context_k,
            "min_overlap": self.min_overlap if self.encoder is None else None,
            "min_similarity": self.min_similarity if self.encoder is not None else None,
            "k1": self.k1,
            "b": self.b,
            "encoder": None if self.encoder is None else self.encoder.identity,
            "tokenizer": self.tokenizer.config,
        }

    def generate(self, query: str, contexts: Sequence[Chunk]) -> Generation:
        started = time.perf_counter()
        shown = list(contexts[: self.context_k])
        sentences = [sentence for chunk in shown for sentence in split_sentences(chunk.text)]
        answer = self._answer(query, sentences)
        return Generation(
            answer=answer,
            prompt=f"{format_context(shown)}\n\nQuestion: {query}",
            model_id=self.model_id,
            latency_s=time.perf_counter() - started,
            context_ids=tuple(chunk.id for chunk in shown),
        )

    def _answer(self, query: str, sentences: list[str]) -> str:
        query_terms = set(self.tokenizer(query))
        if not sentences or (self.encoder is None and not query_terms):
            return REFUSAL_ANSWER
        terms = [self.tokenizer(sentence) for sentence in sentences]
        if self.encoder is None:
            scores = self._bm25(query_terms, terms)
            coverage = [len(query_terms & set(t)) / len(query_terms) for t in terms]
            best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
            if coverage[best] < self.min_overlap:
                return REFUSAL_ANSWER
            eligible = [i for i in range(len(sentences)) if coverage[i] > 0]
        else:
            scores = self._cosine(query, sentences)
            best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
            if scores[best] < self.min_similarity:
                return REFUSAL_ANSWER
            eligible = [i for i in range(len(sentences)) if scores[i] >= self.min_similarity]
        chosen = sorted(eligible, key=lambda i: (-scores[i], i))[: self.top_sentences]
        return " ".join(sentences[i] for i in chosen)

    def _bm25(self, query_terms: set[str], terms: list[list[str]]) -> list[float]:
        n = len(terms)
        avgdl = max(sum(len(t) for t in terms) / n, 1e-9)
        df = Counter(term for t in terms for term in set(t))
        idf = {term: math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5)) for term in query_terms}
        scores = []
        for sentence_terms in terms:
            tf = Counter(sentence_terms)
            norm = self.k1 * (1.0 - self.b + self.b * len(sentence_terms) / avgdl)
            scores.append(sum(idf[t] * tf[t] * (self.k1 + 1.0) / (tf[t] + norm) for t in query_terms if tf[t]))
        return scores

    def _cosine(self, query: str, sentences: list[str]) -> list[float]:
        query_vector = unit_rows(np.asarray(self.encoder.encode_queries([query]), dtype=np.float32))[0]
        sentence_vectors = unit_rows(np.asarray(self.encoder.encode_passages(sentences), dtype=np.float32))
        return [float(value) for value in sentence_vectors @ query_vector]
