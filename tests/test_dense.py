"""Dense retrieval: exact flat search, HNSW/IVF recall, ties, caching, encoders, model names."""

from __future__ import annotations

import numpy as np
import pytest

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.models.resolve import SHORT_NAMES, resolve_model
from ragexp.runtime.fingerprint import stable_hash
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.dense import DenseRetriever
from reference_pipelines.encoders import OnnxEncoder, build_encoder, make_cached_encoder


class TableEncoder:
    """An encoder without a model: each text's vector comes from a fixed table."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.identity = {"encoder": "table", "vectors": stable_hash(sorted((t, v.tolist()) for t, v in table.items()))}
        self.passage_calls = 0

    def encode_queries(self, texts):
        return np.stack([self.table[t] for t in texts]).astype(np.float32)

    def encode_passages(self, texts):
        self.passage_calls += 1
        return self.encode_queries(texts)


def clustered(n_docs: int, n_queries: int, dim: int = 48, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim))
    docs = centres[rng.integers(0, 40, n_docs)] + 0.35 * rng.standard_normal((n_docs, dim))
    queries = docs[rng.integers(0, n_docs, n_queries)] + 0.3 * rng.standard_normal((n_queries, dim))
    unit = lambda m: (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    doc_texts = [f"doc {i}" for i in range(n_docs)]
    query_texts = [f"query {i}" for i in range(n_queries)]
    table = dict(zip(doc_texts, unit(docs))) | dict(zip(query_texts, unit(queries)))
    chunks = [Chunk(id=f"d{i:05d}#chunk_0", doc_id=f"d{i:05d}", index=0, start=0, end=len(t), text=t) for i, t in enumerate(doc_texts)]
    return TableEncoder(table), chunks, query_texts


def ids(rankings):
    return [[cid for cid, _ in ranking] for ranking in rankings]


def test_flat_search_is_exact_inner_product() -> None:
    encoder, chunks, queries = clustered(500, 20)
    retriever = DenseRetriever(encoder=encoder, index="flat")
    retriever.index(chunks)
    rankings = retriever.search(queries, k=10)
    doc_vectors = encoder.encode_passages([c.text for c in chunks])
    for ranking, query in zip(rankings, encoder.encode_queries(queries)):
        scores = doc_vectors @ query
        expected = np.argsort(-scores, kind="stable")[:10]
        assert [cid for cid, _ in ranking] == [chunks[i].id for i in expected]
        assert [s for _, s in ranking] == pytest.approx(scores[expected].tolist(), abs=1e-5)


def test_hnsw_and_ivf_recall_against_flat() -> None:
    encoder, chunks, queries = clustered(4000, 100)
    exact = DenseRetriever(encoder=encoder, index="flat")
    exact.index(chunks)
    truth = ids(exact.search(queries, k=10))
    for index, kwargs, floor in [("hnsw", {"hnsw_m": 16, "ef_search": 64}, 0.95), ("ivf", {"nprobe": 16}, 0.9)]:
        approximate = DenseRetriever(encoder=encoder, index=index, **kwargs)
        approximate.index(chunks)
        found = ids(approximate.search(queries, k=10))
        recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)])
        assert recall >= floor, f"{index} recall@10 = {recall:.3f}"


def test_ivf_refuses_a_corpus_too_small_to_train() -> None:
    encoder, chunks, _ = clustered(30, 1)
    retriever = DenseRetriever(encoder=encoder, index="ivf")
    with pytest.raises(RagexpInputError, match="cannot hold a corpus of 30 chunks.*index: flat") as err:
        retriever.index(chunks)
    assert err.value.field == "index"
    with pytest.raises(RagexpInputError, match=r"nlist=8 needs >= 312"):
        encoder, chunks, _ = clustered(100, 1)
        DenseRetriever(encoder=encoder, index="ivf", ivf_nlist=8).index(chunks)


def test_ties_at_the_cut_are_broken_by_id_descending() -> None:
    same = np.ones(8, dtype=np.float32) / np.sqrt(8)
    other = np.eye(8, dtype=np.float32)[0]
    table = {f"doc {i}": same for i in range(6)} | {"doc 6": other, "q": same}
    chunks = [Chunk(id=f"c{i}", doc_id=f"c{i}", index=0, start=0, end=5, text=f"doc {i}") for i in range(7)]
    retriever = DenseRetriever(encoder=TableEncoder(table))
    retriever.index(chunks)
    assert ids(retriever.search(["q"], k=3)) == [["c5", "c4", "c3"]]
    assert ids(retriever.search(["q"], k=7)) == [["c5", "c4", "c3", "c2", "c1", "c0", "c6"]]


def test_embeddings_and_trained_index_come_from_the_cache(tmp_path) -> None:
    encoder, chunks, queries = clustered(600, 10)
    cache = StageCache(tmp_path)
    first = DenseRetriever(encoder=encoder, index="hnsw", cache=cache)
    first.index(chunks)
    second = DenseRetriever(encoder=encoder, index="hnsw", cache=cache)
    second.index(chunks)
    assert encoder.passage_calls == 1
    assert cache.hits["embeddings"] == 1 and cache.hits["faiss-index"] == 1
    assert first.search(queries, 5) == second.search(queries, 5)
    third = DenseRetriever(encoder=encoder, index="hnsw", hnsw_m=8, cache=cache)  # new params: new index, same embeddings
    third.index(chunks)
    assert encoder.passage_calls == 1 and cache.misses["faiss-index"] == 2


def test_unknown_model_name_lists_the_short_names(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("minilm-xl", "some-org/not-cached-model", "./no/such/folder"):
        with pytest.raises(RagexpInputError) as err:
            resolve_model(name)
        assert err.value.field == "model"
        assert all(short in str(err.value) for short in SHORT_NAMES), str(err.value)


def test_short_names_resolve_to_installed_files() -> None:
    minilm = resolve_model("minilm")
    assert (minilm.path / "model.safetensors").is_file() and minilm.kind == "sentence-transformers"
    onnx = resolve_model("paraphrase-minilm-l3")
    assert onnx.path.suffix == ".onnx" and onnx.tokenizer.name == "tokenizer.json"


def test_onnx_encoder_mean_pooling_matches_the_graphs_own_pooled_output() -> None:
    """The packaged graph also exports a pooled (batch, 384) output: our masked mean must equal it."""
    import onnxruntime

    texts = ["A man is eating food.", "A man eats a piece of bread in the kitchen, slowly and with great care.", "Cold."]
    raw = OnnxEncoder(model="paraphrase-minilm-l3", normalize=False)
    vectors = raw.encode_passages(texts)
    session = onnxruntime.InferenceSession(str(raw.resolved.path), providers=["CPUExecutionProvider"])
    pooled_name = next(o.name for o in session.get_outputs() if len(o.shape) == 2 and o.shape[1] == 384)
    for text, vector in zip(texts, vectors):
        encoding = raw._tokenizer.encode(text)
        feeds = {"input_ids": np.array([encoding.ids]), "attention_mask": np.array([encoding.attention_mask])}
        (pooled,) = session.run([pooled_name], feeds)
        np.testing.assert_allclose(vector, pooled[0], rtol=1e-4, atol=1e-5)

    encoder = build_encoder({"name": "label", "model": "paraphrase-minilm-l3", "query_prefix": "query: "})
    assert isinstance(encoder, OnnxEncoder)
    unit = encoder.encode_passages(texts)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    similarity = unit @ unit.T
    assert similarity[0, 1] > 0.5 > similarity[0, 2]  # the paraphrase is nearest
    assert not np.allclose(encoder.encode_queries(texts[:1]), encoder.encode_passages(texts[:1]))  # prefix applied


@pytest.mark.slow
def test_minilm_dense_retrieval_end_to_end(tmp_path) -> None:
    docs = {
        "cats": "Cats are small domesticated carnivorous mammals kept as pets.",
        "rust": "Rust is a systems programming language focused on memory safety.",
        "bread": "Sourdough bread is leavened with a culture of wild yeast and bacteria.",
    }
    chunks = [Chunk(id=f"{d}#chunk_0", doc_id=d, index=0, start=0, end=len(t), text=t) for d, t in docs.items()]
    cache = StageCache(tmp_path)
    retriever = DenseRetriever(encoder={"model": "minilm"}, cache=cache)
    retriever.index(chunks)
    rankings = retriever.search(["Which pet animal is a feline?", "How is sourdough made?", "safe low-level code"], k=3)
    assert [ranking[0][0] for ranking in rankings] == ["cats#chunk_0", "bread#chunk_0", "rust#chunk_0"]
    assert retriever.encoder.identity["model"]["weights"] and cache.misses["embeddings"] == 1


def test_encoders_of_one_model_share_the_loaded_weights() -> None:
    """The dense retriever and answer relevance build one encoder each from the embedding node:
    the model is loaded once per process, not once per encoder."""
    first, second = (make_cached_encoder("minilm", backend="torch", max_seq_length=256) for _ in range(2))
    assert first is not second and first.model is second.model
    assert make_cached_encoder("minilm", backend="torch", max_seq_length=128).model is not first.model  # another length: its own copy
    onnx_first, onnx_second = make_cached_encoder("minilm"), make_cached_encoder("minilm")  # ONNX: one session per graph
    onnx_first.encode_queries(["load"]), onnx_second.encode_queries(["load"])
    assert onnx_first._session is onnx_second._session


def test_onnx_sessions_block_idle_threads_instead_of_spinning() -> None:
    """Spinning ORT threads slow the next torch encoding in the process (benchmarks/bench_onnx_spinning)."""
    encoder = OnnxEncoder(model="paraphrase-minilm-l3")
    encoder.encode_passages(["load the session"])
    options = encoder._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
