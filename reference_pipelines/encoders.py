"""Bi-encoders: text -> float32 embedding rows, for dense retrieval and embedding reranking.

Every encoder prepends ``query_prefix`` to queries and ``passage_prefix`` to passages (e5-style
``"query: "`` / ``"passage: "``), truncates to ``max_seq_length`` tokens and, with ``normalize``,
scales rows to unit L2 norm (inner product = cosine). :attr:`Encoder.identity` is everything that
determines the vectors (model name, weights hash, prefixes, length, normalisation), for cache keys.

- :class:`SentenceTransformerEncoder`: any sentence-transformers / Hugging Face folder.
- :class:`OnnxEncoder`: an ONNX BERT-style graph run by onnxruntime with a ``tokenizers``
  tokenizer, mean pooling over the attention mask (sentence-transformers' pooling).

Models are loaded on first use, from local files only (see :mod:`reference_pipelines.models`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragexp.models.resolve import (
    ONNX,
    ResolvedModel,
    model_identity,
    resolve_model,
    unloadable_model_error,
)
from ragexp.runtime import progress


@runtime_checkable
class Encoder(Protocol):
    identity: dict[str, Any]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class _PrefixedEncoder:
    """Shared config handling; subclasses implement ``_encode(texts) -> float32 rows``."""

    def __init__(
        self,
        model: str,
        query_prefix: str = "",
        passage_prefix: str = "",
        max_seq_length: int | None = None,
        normalize: bool = True,
        batch_size: int = 64,
    ) -> None:
        self.resolved: ResolvedModel = resolve_model(model)
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        self.batch_size = batch_size
        self.identity = {
            "encoder": type(self).__name__,
            "model": model_identity(self.resolved),
            "query_prefix": query_prefix,
            "passage_prefix": passage_prefix,
            "max_seq_length": max_seq_length,
            "normalize": normalize,
        }

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_prefix + text for text in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.passage_prefix + text for text in texts])

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(path: str, device: str, max_seq_length: int | None):
    """One loaded model per (folder, device, length) and process: the dense retriever and answer
    relevance share the run's embedding model instead of loading it twice."""
    from sentence_transformers import SentenceTransformer

    progress.apply_to_libraries()  # transformers is imported now
    model = SentenceTransformer(path, device=device, local_files_only=True)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model


class SentenceTransformerEncoder(_PrefixedEncoder):
    """``max_seq_length=None`` keeps the model folder's own limit (256 for all-MiniLM-L6-v2)."""

    def __init__(self, model: str = "minilm", device: str = "cpu", **config: Any) -> None:
        super().__init__(model, **config)
        self.device = device
        self._model = None

    @property
    def model(self):
        if self._model is None:
            try:
                self._model = _load_sentence_transformer(str(self.resolved.path), self.device, self.max_seq_length)
            except (OSError, ValueError) as err:
                raise unloadable_model_error(self.resolved.name, f"{self.resolved.path} is not a sentence-transformers or Hugging Face model ({err})")
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=progress.enabled() and len(texts) > self.batch_size,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


#: ONNX Runtime's session option for whether idle intra-op threads spin ("1", its default) or block.
ONNX_SPINNING = "session.intra_op.allow_spinning"


def onnx_session_options(threads: int | None):
    """ragexp's ONNX Runtime session options: ``threads`` intra-op threads (``None``: ORT's choice)
    that block when idle instead of spinning: spinning ORT threads kept both cores busy after a run
    and slowed the next torch encoding in the same process (benchmarks/bench_onnx_spinning)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry(ONNX_SPINNING, "0")
    return options


@functools.lru_cache(maxsize=4)
def _load_onnx_session(path: str, threads: int | None):
    """One inference session per (graph, thread count) and process: the jobs of a sweep share it
    (a session is read-only at inference; loading one is not free)."""
    import onnxruntime

    return onnxruntime.InferenceSession(path, onnx_session_options(threads), providers=["CPUExecutionProvider"])


class OnnxEncoder(_PrefixedEncoder):
    """ONNX graph with ``input_ids``/``attention_mask`` (``token_type_ids`` if declared) inputs
    and a ``(batch, tokens, dim)`` last-hidden-state output; embedding = masked mean of it."""

    def __init__(self, model: str = "paraphrase-minilm-l3", threads: int | None = None, **config: Any) -> None:
        super().__init__(model, **config)
        if self.resolved.kind != ONNX:
            raise unloadable_model_error(model, "OnnxEncoder needs an .onnx model")
        self.threads = threads
        self._session = None
        self._tokenizer = None

    def _load(self) -> None:
        from tokenizers import Tokenizer

        self._session = _load_onnx_session(str(self.resolved.path), self.threads)
        tokenizer = Tokenizer.from_file(str(self.resolved.tokenizer))
        max_length = self.max_seq_length or self.resolved.max_seq_length or 512
        tokenizer.enable_truncation(max_length=max_length)
        pad_token = "[PAD]" if tokenizer.token_to_id("[PAD]") is not None else "<pad>"
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad_token) or 0, pad_token=pad_token)
        self._tokenizer = tokenizer
        self._input_names = {i.name for i in self._session.get_inputs()}
        hidden = [o.name for o in self._session.get_outputs() if len(o.shape) == 3]
        if not hidden:
            raise unloadable_model_error(self.resolved.name, "the ONNX graph has no (batch, tokens, dim) output to pool")
        self._hidden_output = hidden[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            self._load()
        order = np.argsort([-len(text) for text in texts], kind="stable")  # similar lengths share a batch
        rows: list[np.ndarray] = []
        for start in progress.bar(range(0, len(texts), self.batch_size), desc="onnx: encoding", unit="batch", leave=False, disable=len(texts) <= self.batch_size):
            batch = self._tokenizer.encode_batch([texts[i] for i in order[start : start + self.batch_size]])
            feeds = {
                "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in batch], dtype=np.int64),
            }
            (hidden,) = self._session.run([self._hidden_output], {k: v for k, v in feeds.items() if k in self._input_names})
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            rows.append((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))
        vectors = np.empty((len(texts), rows[0].shape[1] if rows else 0), dtype=np.float32)
        if rows:
            vectors[order] = np.concatenate(rows)
        return unit_rows(vectors) if self.normalize else vectors


def make_encoder(model: str, name: str | None = None, **options: Any) -> Encoder:
    """The encoder for ``model``: an ONNX graph gets :class:`OnnxEncoder`, anything else
    :class:`SentenceTransformerEncoder`; ``options`` go to its constructor. ``name`` is the config
    group's label (``embedding=minilm``) and is ignored. The ``_target_`` of ``conf/embedding``."""
    kind = resolve_model(model).kind
    return OnnxEncoder(model, **options) if kind == ONNX else SentenceTransformerEncoder(model, **options)


def build_encoder(spec: Mapping[str, Any] | Encoder) -> Encoder:
    """An encoder from config: a built :class:`Encoder`, a mapping with ``_target_`` (Hydra), or a
    plain mapping for :func:`make_encoder`."""
    if isinstance(spec, Encoder):
        return spec
    config = dict(spec)
    if "_target_" in config:
        from hydra.utils import instantiate

        return instantiate(config)
    if "model" not in config:
        raise unloadable_model_error("<missing>", "the encoder config has no 'model'", field="encoder.model")
    return make_encoder(**config)
