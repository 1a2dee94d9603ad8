"""Rerankers: re-score the first ``top_n`` candidates of each query with a stronger model.

- :class:`CrossEncoderReranker`: ``score = CrossEncoder(query, chunk text)`` (sentence-transformers).
- :class:`EmbeddingReranker`: ``score = cos(e(query), e(chunk))`` with another bi-encoder.

The re-scored head is ordered best first (ties by chunk id descending); candidates past
``top_n`` keep their retrieval order after it, with scores ``min(head) - 1, min(head) - 2, ...``
so every ranking stays sorted by score and keeps all its ids. With a cache, head scores are
stored per query, keyed by (model identity, query, head ids and texts), so a sweep re-scores
only queries whose head changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.models.device import resolve_device
from ragexp.models.resolve import model_identity, resolve_model, unloadable_model_error
from ragexp.runtime import progress
from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.base import Ranking
from reference_pipelines.encoders import Encoder, build_encoder, unit_rows
from reference_pipelines.ranking import indexed_text, sort_ranking


class _HeadReranker:
    """Caching and ordering shared by the rerankers; subclasses score ``(query, texts)`` pairs."""

    identity: dict[str, Any]

    def __init__(self, top_n: int, include_title: bool, cache: StageCache | None) -> None:
        if top_n < 1:
            raise RagexpInputError(f"top_n must be >= 1, got {top_n}", field="top_n")
        self.top_n = top_n
        self.include_title = include_title
        self.cache = cache

    def _score_heads(self, queries: Sequence[str], heads: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Scores for ``heads[i]`` (chunk texts) against ``queries[i]``, batched over all queries."""
        raise NotImplementedError

    def rerank(self, queries: Sequence[str], candidates: Sequence[Ranking], chunks: Mapping[str, Chunk]) -> list[Ranking]:
        heads = [[chunk_id for chunk_id, _ in ranking[: self.top_n]] for ranking in candidates]
        texts = [[indexed_text(chunks[chunk_id], self.include_title) for chunk_id in head] for head in heads]
        keys = [
            {"reranker": self.identity, "query": query, "head": stable_hash(list(zip(head, head_texts)))}
            for query, head, head_texts in zip(queries, heads, texts)
        ]
        scores: list[list[float] | None] = [
            self.cache.get_json("rerank-scores", key) if self.cache is not None and head else None
            for key, head in zip(keys, heads)
        ]
        todo = [i for i, found in enumerate(scores) if found is None]
        for i, fresh in zip(todo, self._score_heads([queries[i] for i in todo], [texts[i] for i in todo])):
            scores[i] = [float(s) for s in fresh]
            if self.cache is not None and heads[i]:
                self.cache.put_json("rerank-scores", keys[i], scores[i])
        return [_reorder(ranking, head, head_scores) for ranking, head, head_scores in zip(candidates, heads, scores)]


def _reorder(ranking: Ranking, head: list[str], head_scores: list[float]) -> Ranking:
    reranked = sort_ranking(list(zip(head, head_scores)))
    floor = min(head_scores, default=0.0)
    tail = [(chunk_id, floor - position) for position, (chunk_id, _) in enumerate(ranking[len(head) :], start=1)]
    return reranked + tail


class CrossEncoderReranker(_HeadReranker):
    """``model``: a local CrossEncoder folder or a Hugging Face id (see :func:`resolve_model`).
    ``device``: ``auto``, ``cpu``, ``cuda[:N]`` (:mod:`ragexp.models.device`)."""

    def __init__(
        self,
        model: str,
        top_n: int = 50,
        batch_size: int = 32,
        max_length: int | None = None,
        include_title: bool = True,
        device: str = "auto",
        cache: StageCache | None = None,
    ) -> None:
        super().__init__(top_n, include_title, cache)
        self.resolved = resolve_model(model)
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = resolve_device(device)
        self.identity = {"reranker": "cross-encoder", "model": model_identity(self.resolved), "max_length": max_length}
        self._model = None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            progress.apply_to_libraries()  # transformers is imported now
            try:
                self._model = CrossEncoder(
                    str(self.resolved.path), device=self.device, max_length=self.max_length, local_files_only=True
                )
            except (OSError, ValueError) as err:
                raise unloadable_model_error(self.resolved.name, f"{self.resolved.path} is not a CrossEncoder model ({err})")
        return self._model

    def _score_heads(self, queries: Sequence[str], heads: Sequence[Sequence[str]]) -> list[np.ndarray]:
        pairs = [(query, text) for query, head in zip(queries, heads) for text in head]
        if not pairs:
            return [np.zeros(0) for _ in heads]
        flat = np.asarray(
            self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=progress.enabled() and len(pairs) > self.batch_size),
            dtype=np.float64,
        ).reshape(len(pairs))
        return np.split(flat, np.cumsum([len(head) for head in heads])[:-1])


class EmbeddingReranker(_HeadReranker):
    """``encoder``: an :class:`~reference_pipelines.encoders.Encoder` or its config mapping.

    Only the candidates' texts are embedded; with a stage cache each distinct text (and query) is
    embedded once per encoder across chunkings, retrievers and runs
    (:mod:`ragexp.runtime.text_vectors`), so a sweep pays the reranker's model once per distinct text.
    """

    def __init__(
        self,
        encoder: Mapping[str, Any] | Encoder,
        top_n: int = 50,
        include_title: bool = True,
        cache: StageCache | None = None,
    ) -> None:
        super().__init__(top_n, include_title, cache)
        self.encoder = build_encoder(encoder, cache)
        self.identity = {"reranker": "embedding", "encoder": self.encoder.identity}

    def _score_heads(self, queries: Sequence[str], heads: Sequence[Sequence[str]]) -> list[np.ndarray]:
        unique_texts = list(dict.fromkeys(text for head in heads for text in head))
        if not unique_texts:
            return [np.zeros(0) for _ in heads]
        row = {text: i for i, text in enumerate(unique_texts)}
        passages = unit_rows(self.encoder.encode_passages(unique_texts))
        query_vectors = unit_rows(self.encoder.encode_queries(list(queries)))
        return [passages[[row[text] for text in head]] @ query_vectors[i] if head else np.zeros(0) for i, head in enumerate(heads)]
