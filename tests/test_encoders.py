"""Encoder backends and distinct work once: ONNX equals torch, int8 is close, sorted batches keep
the order, a model ONNX cannot take falls back to torch (said once), precision separates cache
entries, and a text is encoded once per encoder across chunkings and components."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragexp.chunking import make_chunker
from ragexp.config.compose import compose_config
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.evaluation.pipeline import build_component
from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from ragexp.models.encoders import effective_backend, make_encoder, with_effective_backends
from ragexp.models.onnx_export import EXPORT_VERSION, MIN_COSINE
from ragexp.models.resolve import resolve_model
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.text_vectors import (
    BACKEND_NOTES,
    CachedEncoder,
    encoding_counts,
    encodings_since,
    with_text_vectors,
)
from ragexp.tracking.run_logger import TAG_EMBEDDING_BACKEND, run_tags
from reference_pipelines.dense import DenseRetriever
from reference_pipelines.encoders import (
    Embedding,
    OnnxEncoder,
    SentenceTransformerEncoder,
    make_cached_encoder,
)
from tests.helpers.configs import compose_run_config


@pytest.fixture(scope="module")
def demo_texts() -> tuple[list[str], list[str]]:
    """60 demo chunks (every 10th, recursive-512) and every 4th demo query: real texts of every length."""
    corpus_dir, evalset_path = demo_paths()
    corpus = load_corpus(corpus_dir)
    chunks = make_chunker({"name": "recursive", "size": 512, "overlap": 64}).chunk_corpus(corpus)
    queries = [item.query for item in load_evalset(evalset_path, corpus).items]
    return [c.text_with_title() for c in chunks[::10]], queries[::4]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_export_gives_torchs_vectors_and_int8_stays_close(demo_texts) -> None:
    passages, queries = demo_texts
    passages = [*passages, " ".join(passages[:8])]  # one text past the model's 256 tokens: truncated alike
    torch_encoder = make_cached_encoder("minilm", backend="torch")  # no max_seq_length: the folder's own (256)
    onnx_encoder = make_cached_encoder("minilm")
    int8_encoder = make_cached_encoder("minilm", precision="int8")
    assert onnx_encoder.max_seq_length == torch_encoder.model.max_seq_length == 256
    assert isinstance(torch_encoder, SentenceTransformerEncoder) and isinstance(onnx_encoder, OnnxEncoder)
    assert (onnx_encoder.identity["backend"], int8_encoder.identity["precision"]) == ("onnx", "int8")
    reference = np.vstack([torch_encoder.encode_passages(passages), torch_encoder.encode_queries(queries)])
    fp32 = np.vstack([onnx_encoder.encode_passages(passages), onnx_encoder.encode_queries(queries)])
    int8 = np.vstack([int8_encoder.encode_passages(passages), int8_encoder.encode_queries(queries)])
    assert cosines(fp32, reference).min() >= MIN_COSINE
    int8_cosines = cosines(int8, reference)
    assert int8_cosines.mean() >= 0.99 and int8_cosines.min() >= 0.97, (int8_cosines.mean(), int8_cosines.min())
    assert cosines(int8, reference).min() < MIN_COSINE  # int8 is not the same vectors: it must be named apart


def test_an_int8_vector_is_a_function_of_its_text_alone(demo_texts) -> None:
    """Dynamic quantisation scales activations by their range: over a batch, a text's vector would
    depend on its batch mates (cosine 0.9897 measured before the fix); each text runs alone."""
    passages, queries = demo_texts
    texts = [queries[0], passages[3], "Cold."]
    int8 = make_cached_encoder("minilm", precision="int8", batch_size=64)
    alone = np.vstack([int8.encode_queries([text]) for text in texts])
    for batch_mates in (passages[:20], [passages[-1]], queries[1:]):
        in_batch = int8.encode_queries([*batch_mates, *texts])[len(batch_mates):]
        assert cosines(alone, in_batch).min() >= 0.99999, cosines(alone, in_batch)


def test_length_sorted_batches_keep_the_input_order(demo_texts) -> None:
    passages, _ = demo_texts
    texts = passages[:40] + ["Cold.", passages[0]]  # a duplicate and a one-token text among long ones
    sorted_batches = make_cached_encoder("paraphrase-minilm-l3", batch_size=8)
    in_order = OnnxEncoder("paraphrase-minilm-l3", batch_size=8, sort_by_length=False)
    one_by_one = np.vstack([in_order.encode_passages([text]) for text in texts])
    np.testing.assert_allclose(sorted_batches.encode_passages(texts), one_by_one, atol=1e-5)
    np.testing.assert_allclose(in_order.encode_passages(texts), one_by_one, atol=1e-5)


def test_precision_and_backend_separate_identities_and_cache_entries(tmp_path) -> None:
    cache = StageCache(tmp_path)
    built = {spec: make_cached_encoder("minilm", cache=cache, **dict(spec)) for spec in
             [(("precision", "fp32"),), (("precision", "int8"),), (("backend", "torch"),)]}
    identities = [encoder.identity for encoder in built.values()]
    assert all(isinstance(encoder, CachedEncoder) for encoder in built.values())
    assert len({json.dumps(identity, sort_keys=True) for identity in identities}) == 3
    for encoder in built.values():
        encoder.encode_queries(["one query"])
    assert len(list((tmp_path / "text-vectors").iterdir())) == 3  # one store per identity
    fp32, int8 = (compose_config([f"embedding.precision={p}"]) for p in ("fp32", "int8"))
    assert fp32.embedding.precision != int8.embedding.precision  # the run's config (and its hash) names it


def test_the_way_a_graph_was_exported_is_part_of_its_cache_key(tmp_path) -> None:
    """Vectors of an older export (another attention, another opset) are never served for this one."""
    exported = make_encoder("minilm")
    assert exported.identity["export"] == EXPORT_VERSION and EXPORT_VERSION in exported.graph.parts
    cache = StageCache(tmp_path)
    same_graph = {version: with_text_vectors(OnnxEncoder(exported.resolved, graph=exported.graph, tokenizer=exported.tokenizer_path,
                                                         max_seq_length=256, export=version), cache)
                  for version in (EXPORT_VERSION, "v1")}
    assert same_graph[EXPORT_VERSION].identity == exported.identity != same_graph["v1"].identity
    for encoder in same_graph.values():
        encoder.encode_queries(["one query"])
    assert len(list((tmp_path / "text-vectors").iterdir())) == 2


class CountingEncoder:
    """A model stand-in: a text's vector is a hash of it; counts the texts it is asked to encode."""

    identity = {"encoder": "counting", "model": {"name": "counting", "weights": "0"}}

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def _vectors(self, texts) -> np.ndarray:
        self.encoded.extend(texts)
        return np.array([[hash(t) % 97 + 1.0, len(t) + 1.0, 1.0] for t in texts], dtype=np.float32)

    encode_queries = encode_passages = _vectors


def chunks_of(texts: list[str], prefix: str) -> list[Chunk]:
    return [Chunk(id=f"{prefix}{i}", doc_id=f"d{i}", index=0, start=0, end=len(t), text=t) for i, t in enumerate(texts)]


def test_each_distinct_text_is_encoded_once_across_chunkings_and_runs(tmp_path) -> None:
    model = CountingEncoder()
    before = encoding_counts()
    first_chunking = ["alpha text", "beta text", "gamma text", "alpha text"]
    second_chunking = ["beta text", "gamma text", "delta text"]
    for texts, prefix in ((first_chunking, "a"), (second_chunking, "b")):
        retriever = DenseRetriever(encoder=model, cache=StageCache(tmp_path))  # a new job: its own StageCache
        retriever.index(chunks_of(texts, prefix))
        retriever.search(["which text?"], k=2)
    assert sorted(model.encoded) == sorted(["alpha text", "beta text", "gamma text", "delta text", "which text?"])
    # beta and gamma read back; the second job's query came from its query-embeddings stage entry
    assert encodings_since(before)["counting"] == {"encoded": 5, "cached": 2}
    fresh = DenseRetriever(encoder=model, cache=StageCache(tmp_path))
    fresh.index(chunks_of(["delta text", "alpha text"], "c"))  # a third chunking of known texts
    assert len(model.encoded) == 5


def test_build_component_hands_the_stage_cache_to_a_hybrids_dense_encoder(tmp_path) -> None:
    cfg = compose_config(["retrieval=hybrid_rrf", "embedding=paraphrase_minilm_l3"])
    hybrid = build_component(cfg.retrieval, "retrieval", StageCache(tmp_path))
    dense = next(r for r in hybrid.retrievers if isinstance(r, DenseRetriever))
    assert isinstance(dense.encoder, CachedEncoder) and dense.encoder.cache.root == tmp_path


def cls_pooling_minilm(tmp_path: Path) -> Path:
    """all-MiniLM-L6-v2 with CLS pooling: a model the ONNX export refuses (it pools by mean only)."""
    source = resolve_model("minilm").path
    folder = tmp_path / "minilm-cls"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(source / "model.safetensors")
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


def test_a_model_onnx_cannot_export_runs_on_torch_and_says_so_once(tmp_path, caplog) -> None:
    folder = cls_pooling_minilm(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ragexp.models.encoders"):
        encoders = [make_cached_encoder(str(folder)) for _ in range(2)]
    assert all(isinstance(encoder, SentenceTransformerEncoder) for encoder in encoders)
    assert encoders[0].identity["backend"] == "torch"
    said = [record.getMessage() for record in caplog.records if str(folder) in record.getMessage()]
    assert len(said) == 1 and "Pooling(cls)" in said[0], said
    assert "Pooling(cls)" in BACKEND_NOTES[str(folder)]
    with pytest.raises(RagexpInputError) as err:
        make_cached_encoder(str(folder), precision="int8")
    assert err.value.field == "precision"


def test_the_embedding_group_builds_a_component_class_that_encodes_like_make_encoder(tmp_path) -> None:
    embedding = build_component(compose_config([]).embedding, "embedding", StageCache(tmp_path))
    assert isinstance(embedding, Embedding) and isinstance(embedding.encoder, OnnxEncoder)
    direct = make_cached_encoder("minilm", max_seq_length=256, batch_size=64)
    assert embedding.identity == direct.identity and embedding.backend == "onnx"
    np.testing.assert_array_equal(embedding.encode_queries(["a query"]), direct.encode_queries(["a query"]))
    torch = build_component(compose_config(["embedding.backend=torch"]).embedding, "embedding", StageCache(tmp_path))
    assert isinstance(torch.encoder, SentenceTransformerEncoder) and torch.backend == "torch"
    with pytest.raises(RagexpInputError) as err:
        build_component(compose_config(["embedding.backend=torch", "embedding.precision=int8"]).embedding, "embedding",
                        StageCache(tmp_path))
    assert err.value.field == "embedding.precision"


def test_a_model_onnx_cannot_export_is_labelled_torch_wherever_it_is_keyed(tmp_path) -> None:
    folder = cls_pooling_minilm(tmp_path)
    embedding = Embedding(model=str(folder), backend="onnx")
    assert embedding.backend == embedding.identity["backend"] == "torch"
    assert effective_backend(str(folder), "onnx") == "torch" and effective_backend("minilm", "onnx") == "onnx"
    configured = {"_target_": "reference_pipelines.dense.DenseRetriever",
                  "encoder": {"_target_": "reference_pipelines.encoders.Embedding", "model": str(folder), "backend": "onnx"}}
    assert with_effective_backends(configured)["encoder"]["backend"] == "torch"
    assert with_effective_backends({**configured, "encoder": {"model": "minilm", "backend": "onnx"}}) == \
        {**configured, "encoder": {"model": "minilm", "backend": "onnx"}}


@pytest.mark.slow
def test_a_run_that_fell_back_to_torch_shares_a_torch_runs_cache_entries_and_logs_torch(tiny_dataset, tmp_path) -> None:
    folder = cls_pooling_minilm(tmp_path)
    results = {}
    for backend in ("onnx", "torch"):
        cfg = compose_run_config(tiny_dataset, tmp_path / "cache", "retrieval=dense", f"embedding.model={folder}",
                                 f"embedding.backend={backend}", "eval.bootstrap_resamples=20")
        job = run_job(job_spec(cfg), output_dir=tmp_path / backend, log_to=None)
        results[backend] = job.output.results
        assert run_tags(cfg, job.output, job.evalset)[TAG_EMBEDDING_BACKEND] == "torch"
    assert results["onnx"].meta["embedding_backend"] == results["torch"].meta["embedding_backend"] == "torch"
    assert [label.split()[1] for label in results["onnx"].meta["encodings"]] == ["torch"]
    assert results["torch"].meta["retrieval_from_cache"]  # the fallback run's rankings, keyed by what encoded
    assert len(list((tmp_path / "cache" / "text-vectors").iterdir())) == 1  # one vector store: one identity
    assert results["onnx"].per_query == results["torch"].per_query


def test_query_log_encoder_runs_on_onnx() -> None:
    from ragexp.candidates.query_encoder import QueryEncoder

    encoder = QueryEncoder("minilm", threads=1)
    vectors = encoder(["a question about cats", "a question about dogs"])
    assert isinstance(encoder._encoder, OnnxEncoder) and vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
