"""Rerankers: a locally built tiny CrossEncoder loaded by path, the embedding reranker, caching."""

from __future__ import annotations

import numpy as np
import pytest

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.models.resolve import resolve_model
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.rerank import CrossEncoderReranker, EmbeddingReranker

TEXTS = {
    "d1": "Insulin regulates blood glucose.",
    "d2": "The Eiffel tower is in Paris.",
    "d3": "Glucose is a simple sugar that cells burn for energy.",
    "d4": "Paris is the capital of France.",
    "d5": "Type 2 diabetes impairs the response to insulin.",
}
CHUNKS = {f"{d}#chunk_0": Chunk(f"{d}#chunk_0", d, 0, 0, len(t), t, title=f"Title {d}") for d, t in TEXTS.items()}
QUERIES = ["what controls blood sugar", "where is the Eiffel tower"]
CANDIDATES = [
    [("d2#chunk_0", 9.0), ("d1#chunk_0", 8.0), ("d3#chunk_0", 7.0), ("d4#chunk_0", 6.0), ("d5#chunk_0", 5.0)],
    [("d4#chunk_0", 3.0), ("d1#chunk_0", 2.0), ("d2#chunk_0", 1.0)],
]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """MiniLM's BERT cut to one layer with a fresh 1-label head, saved as a CrossEncoder folder."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    minilm = resolve_model("minilm").path
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(minilm, num_labels=1, num_hidden_layers=1)
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    return str(folder)


def check_reranked(reranked, candidates, top_n: int, head_scores: dict[str, float]) -> None:
    head = [cid for cid, _ in candidates[:top_n]]
    expected_head = sorted(sorted(head, reverse=True), key=lambda cid: -head_scores[cid])
    assert [cid for cid, _ in reranked[: len(head)]] == expected_head
    assert [s for _, s in reranked[: len(head)]] == pytest.approx([head_scores[cid] for cid in expected_head], rel=1e-5)
    assert [cid for cid, _ in reranked[len(head) :]] == [cid for cid, _ in candidates[top_n:]]  # tail keeps its order
    scores = [s for _, s in reranked]
    assert scores == sorted(scores, reverse=True) and len(reranked) == len(candidates)


@pytest.mark.slow
def test_cross_encoder_reranks_the_head_by_model_scores(tiny_cross_encoder, tmp_path) -> None:
    from sentence_transformers import CrossEncoder

    cache = StageCache(tmp_path)
    reranker = CrossEncoderReranker(model=tiny_cross_encoder, top_n=3, batch_size=4, cache=cache)
    reranked = reranker.rerank(QUERIES, CANDIDATES, CHUNKS)

    reference = CrossEncoder(tiny_cross_encoder, local_files_only=True)
    for query, candidates, ranking in zip(QUERIES, CANDIDATES, reranked):
        head = [cid for cid, _ in candidates[:3]]
        predicted = reference.predict([(query, CHUNKS[cid].text_with_title()) for cid in head])
        check_reranked(ranking, candidates, 3, dict(zip(head, map(float, predicted))))

    again = CrossEncoderReranker(model=tiny_cross_encoder, top_n=3, cache=cache)
    assert again.rerank(QUERIES, CANDIDATES, CHUNKS) == reranked
    assert again._model is None  # every score came from the cache: the model was never loaded
    assert cache.hits["rerank-scores"] == 2 and cache.misses["rerank-scores"] == 2


def test_missing_cross_encoder_is_a_clear_input_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RagexpInputError, match="cannot load model 'cross-encoder/ms-marco-MiniLM-L6-v2'") as err:
        CrossEncoderReranker(model="cross-encoder/ms-marco-MiniLM-L6-v2")
    assert err.value.field == "model"
    with pytest.raises(RagexpInputError, match="no model file or folder"):
        CrossEncoderReranker(model=str(tmp_path / "missing" / "model"))


class BagOfWordsEncoder:
    """A model-free bi-encoder: hashed word counts."""

    identity = {"encoder": "bag-of-words"}

    def _encode(self, texts):
        vectors = np.zeros((len(texts), 64))
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", "").split():
                vectors[row, sum(map(ord, word)) % 64] += 1
        return vectors

    encode_queries = encode_passages = _encode


def test_embedding_reranker_uses_cosine_of_the_second_encoder(tmp_path) -> None:
    encoder = BagOfWordsEncoder()
    reranker = EmbeddingReranker(encoder=encoder, top_n=4, cache=StageCache(tmp_path))
    reranked = reranker.rerank(QUERIES, CANDIDATES, CHUNKS)
    for query, candidates, ranking in zip(QUERIES, CANDIDATES, reranked):
        q = encoder.encode_queries([query])[0]
        head = [cid for cid, _ in candidates[:4]]
        passages = encoder.encode_passages([CHUNKS[cid].text_with_title() for cid in head])
        cosine = passages @ q / (np.linalg.norm(passages, axis=1) * np.linalg.norm(q))
        check_reranked(ranking, candidates, 4, dict(zip(head, cosine.tolist())))
    assert reranked[1][0][0] == "d2#chunk_0"  # the Eiffel passage moves up from third


def test_top_n_must_be_positive() -> None:
    with pytest.raises(RagexpInputError) as err:
        EmbeddingReranker(encoder=BagOfWordsEncoder(), top_n=0)
    assert err.value.field == "top_n"


class CountingEncoder(BagOfWordsEncoder):
    def __init__(self) -> None:
        self.passage_texts = 0

    def encode_passages(self, texts):
        self.passage_texts += len(texts)
        return super().encode_passages(texts)


def test_embedding_reranker_embeds_each_head_text_once_and_matches_the_uncached_scores(tmp_path) -> None:
    cache = StageCache(tmp_path)
    first, second = CountingEncoder(), CountingEncoder()
    reranked = EmbeddingReranker(encoder=first, top_n=4, cache=cache).rerank(QUERIES, CANDIDATES, CHUNKS)
    assert first.passage_texts == 4  # the distinct texts of both heads (d1-d4), not per query head, not d5
    other_candidates = [list(reversed(c)) for c in CANDIDATES]  # another retriever's heads: new scores needed
    EmbeddingReranker(encoder=second, top_n=4, cache=cache).rerank(QUERIES, other_candidates, CHUNKS)
    assert second.passage_texts == 1  # only d5 is new; the others come from the text-vector cache
    uncached = EmbeddingReranker(encoder=BagOfWordsEncoder(), top_n=4).rerank(QUERIES, CANDIDATES, CHUNKS)
    for cached_ranking, plain_ranking in zip(reranked, uncached):
        assert [c for c, _ in cached_ranking] == [c for c, _ in plain_ranking]
        assert [s for _, s in cached_ranking] == pytest.approx([s for _, s in plain_ranking], rel=1e-6)
