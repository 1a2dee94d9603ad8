"""Bi-encoders: text -> float32 embedding rows, for dense retrieval, reranking, judging, query logs.

Every encoder prepends ``query_prefix`` to queries and ``passage_prefix`` to passages (e5-style
``"query: "`` / ``"passage: "``), truncates to ``max_seq_length`` tokens and, with ``normalize``,
scales rows to unit L2 norm (inner product = cosine). :attr:`Encoder.identity` is everything that
determines the vectors (model name, weights hash, backend, precision, prefixes, length,
normalisation), for cache keys: int8 and fp32, ONNX and torch never share an entry.

Backends (:func:`make_encoder`, ``embedding.backend``):

- ``onnx`` (default): :class:`OnnxEncoder`, ONNX Runtime. An ``.onnx`` model runs as it is; a
  sentence-transformers folder is exported once (:mod:`ragexp.models.onnx_export`) and used only
  when its vectors equal torch's (cosine >= 0.9999 on probe texts). When the export is refused the
  torch backend runs instead and the reason is logged once per process and recorded with every
  run that encodes with it (:data:`ragexp.runtime.text_vectors.BACKEND_NOTES`).
- ``torch``: :class:`SentenceTransformerEncoder`, sentence-transformers.

``precision``: ``fp32`` or ``int8`` (ONNX Runtime dynamic quantisation; lossy, ONNX only).

``device`` (:mod:`ragexp.models.device`, resolved by the caller): torch runs on it; ONNX Runtime
runs on a GPU through its CUDA provider when installed (``onnxruntime-gpu``). Without that
provider a sentence-transformers folder runs on the torch backend on the GPU instead, said once
like the export fallback; an ``.onnx`` model (no torch weights) stays on the CPU, said once.

Batching (ONNX): all texts are tokenised once, sorted by token count (longest first, stable),
cut into ``batch_size`` batches padded to each batch's longest text, and the rows are put back
in input order; sentence-transformers sorts by character length the same way. ``int8`` runs
each text alone (batches of one, whatever ``batch_size`` says): dynamic quantisation scales the
activations by their range over the whole input, so in a batch a text's vector depended on its
batch mates (cosine 0.9897 to the same text alone); alone it is a function of the text, which the
text-vector cache and ``ragexp reproduce`` rely on (and it measured faster than batches of 64). Threads: ONNX
sessions get ``threads`` intra-op threads and torch is set to ``threads``
(:func:`ragexp.runtime.threads.resolve_threads`; ``"auto"``: the cores this job owns).

Models are loaded on first use, from local files only (see :mod:`ragexp.models.resolve`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragexp.errors import RagexpInputError
from ragexp.models import onnx_export
from ragexp.models.device import onnx_cuda_available, resolve_device
from ragexp.models.onnx_export import INT8_METHOD
from ragexp.models.resolve import (
    HF_FOLDER,
    ONNX,
    ResolvedModel,
    model_identity,
    resolve_model,
    unloadable_model_error,
)
from ragexp.runtime import progress
from ragexp.runtime.text_vectors import BACKEND_NOTES, with_text_vectors
from ragexp.runtime.threads import configure_threads, resolve_threads

log = logging.getLogger(__name__)

BACKENDS = ("onnx", "torch")
#: Texts per model call. 16, not 64: a batch of 64 texts of up to 256 tokens holds 200 MB of
#: attention scores, far beyond the CPU caches; all-MiniLM-L6-v2 ONNX fp32 took 1.44x as long at
#: 64 as at 16 (197 demo chunks, one thread, load 1.3); on SciFact abstracts at load 13-18
#: 1.08-1.5x; 4 and 8 were within 15% of 16, either way (docs/pipelines.md).
BATCH_SIZE = 16
PRECISIONS = ("fp32", "int8")


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

    backend = ""

    def __init__(
        self,
        model: str | ResolvedModel,
        query_prefix: str = "",
        passage_prefix: str = "",
        max_seq_length: int | None = None,
        normalize: bool = True,
        batch_size: int = BATCH_SIZE,
        threads: int | str = "auto",
        precision: str = "fp32",
    ) -> None:
        self.resolved: ResolvedModel = model if isinstance(model, ResolvedModel) else resolve_model(model)
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        self.batch_size = batch_size
        self.threads = threads
        self.precision = precision
        self.identity = {
            "encoder": type(self).__name__,
            "model": model_identity(self.resolved),
            "backend": self.backend,
            "precision": precision,
            **({"quantization": INT8_METHOD} if precision == "int8" else {}),
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
    """The torch backend. ``max_seq_length=None`` keeps the model folder's own limit (256 for
    all-MiniLM-L6-v2)."""

    backend = "torch"

    def __init__(self, model: str | ResolvedModel = "minilm", device: str = "cpu", **config: Any) -> None:
        super().__init__(model, **config)
        if self.precision != "fp32":
            raise RagexpInputError(f"precision {self.precision!r} needs backend onnx; the torch backend runs fp32", field="precision")
        self.device = device
        self._model = None

    @property
    def model(self):
        if self._model is None:
            configure_threads(self.threads)
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


@functools.lru_cache(maxsize=8)
def _load_onnx_session(path: str, threads: int | None, device: str = "cpu"):
    """One inference session per (graph, thread count, device) and process: the jobs of a sweep
    share it (a session is read-only at inference; loading one is not free)."""
    import onnxruntime

    providers: list = ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        providers.insert(0, ("CUDAExecutionProvider", {"device_id": int(device.partition(":")[2] or 0)}))
    return onnxruntime.InferenceSession(path, onnx_session_options(threads), providers=providers)


class OnnxEncoder(_PrefixedEncoder):
    """ONNX graph with ``input_ids``/``attention_mask`` (``token_type_ids`` if declared) inputs
    and a ``(batch, tokens, dim)`` last-hidden-state output; embedding = masked mean of it.

    ``graph``/``tokenizer`` override the files to run (an export of ``model``, or its int8
    quantisation); ``model`` still names the weights in :attr:`identity`, ``export`` how ``graph`` was
    exported from them (:data:`~ragexp.models.onnx_export.EXPORT_VERSION`). ``sort_by_length=False``
    batches in input order (for ``benchmarks/bench_encoders.py``; the vectors are the same).
    """

    backend = "onnx"

    def __init__(
        self, model: str | ResolvedModel = "paraphrase-minilm-l3", graph: Path | None = None, tokenizer: Path | None = None,
        sort_by_length: bool = True, device: str = "cpu", export: str | None = None, **config: Any,
    ) -> None:
        super().__init__(model, **config)
        if export is not None:
            self.identity["export"] = export
        self.device = device
        if graph is None and self.resolved.kind != ONNX:
            raise unloadable_model_error(self.resolved.name, "OnnxEncoder needs an .onnx model")
        self.graph = graph or self.resolved.path
        self.tokenizer_path = tokenizer or self.resolved.tokenizer
        self.sort_by_length = sort_by_length
        self._session = None
        self._tokenizer = None

    @classmethod
    def from_graph(cls, graph, **config: Any) -> OnnxEncoder:
        """An encoder over an :class:`~ragexp.models.onnx_export.OnnxGraph` alone (the export check)."""
        resolved = ResolvedModel(str(graph.path), graph.path, ONNX, graph.tokenizer)
        return cls(resolved, graph=graph.path, tokenizer=graph.tokenizer, **config)

    def _load(self) -> None:
        from tokenizers import Tokenizer

        self._session = _load_onnx_session(str(self.graph), resolve_threads(self.threads), self.device)
        tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        tokenizer.enable_truncation(max_length=self.max_seq_length or self.resolved.max_seq_length or 512)
        tokenizer.no_padding()
        pad_token = "[PAD]" if tokenizer.token_to_id("[PAD]") is not None else "<pad>"
        self._pad_id = tokenizer.token_to_id(pad_token) or 0
        self._tokenizer = tokenizer
        self._input_names = {i.name for i in self._session.get_inputs()}
        hidden = [o.name for o in self._session.get_outputs() if len(o.shape) == 3]
        if not hidden:
            raise unloadable_model_error(self.resolved.name, "the ONNX graph has no (batch, tokens, dim) output to pool")
        self._hidden_output = hidden[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            self._load()
        encodings = self._tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable") if self.sort_by_length else np.arange(len(texts))
        step = 1 if self.precision == "int8" else self.batch_size  # int8: one text per run (module docstring)
        rows: list[np.ndarray] = []
        for start in progress.bar(range(0, len(texts), step), desc="onnx: encoding", unit="batch", leave=False, disable=len(texts) <= step):
            batch = order[start : start + step]
            width = int(lengths[batch].max())
            feeds = {
                "input_ids": np.full((len(batch), width), self._pad_id, dtype=np.int64),
                "attention_mask": np.zeros((len(batch), width), dtype=np.int64),
                "token_type_ids": np.zeros((len(batch), width), dtype=np.int64),
            }
            for row, i in enumerate(batch):
                e = encodings[i]
                feeds["input_ids"][row, : len(e.ids)] = e.ids
                feeds["attention_mask"][row, : len(e.ids)] = e.attention_mask
                feeds["token_type_ids"][row, : len(e.ids)] = e.type_ids
            (hidden,) = self._session.run([self._hidden_output], {k: v for k, v in feeds.items() if k in self._input_names})
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            rows.append((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))
        vectors = np.empty((len(texts), rows[0].shape[1] if rows else 0), dtype=np.float32)
        if rows:
            vectors[order] = np.concatenate(rows)
        return unit_rows(vectors) if self.normalize else vectors


def _note_once(model: str, reason: str, runs_on: str = "torch, not ONNX") -> None:
    if BACKEND_NOTES.get(model) != reason:
        BACKEND_NOTES[model] = reason
        log.warning("embedding model %s runs on %s: %s", model, runs_on, reason)


def _plan(resolved: ResolvedModel, backend: str, device: str = "cpu") -> tuple[onnx_export.OnnxGraph | None, int | None, str]:
    """How :func:`make_encoder` runs ``resolved``: ``(graph, max_seq_length of the export, reason)``;
    ``graph`` is the fp32 ONNX graph to run, ``None`` for torch (``reason``: why torch although
    ``backend`` is ``onnx``; empty when torch was asked for)."""
    if resolved.kind == ONNX:
        return onnx_export.OnnxGraph(resolved.path, resolved.tokenizer), None, ""
    if backend == "torch":
        return None, None, ""
    if resolved.kind != HF_FOLDER:
        return None, None, f"a {resolved.kind} model is not a sentence-transformers folder ONNX can export"
    if device != "cpu" and not onnx_cuda_available():
        return None, None, f"ONNX Runtime has no CUDA provider here (install onnxruntime-gpu); torch runs it on {device}"
    export = onnx_export.exported(resolved, _graph_vectors)
    return export.graph, export.max_seq_length, "" if export.graph is not None else export.reason


def _graph_vectors(graph: onnx_export.OnnxGraph, max_seq_length: int | None, texts: list[str]) -> np.ndarray:
    """Passage vectors of an ONNX graph alone, one thread (the export's check against torch)."""
    return OnnxEncoder.from_graph(graph, max_seq_length=max_seq_length, threads=1).encode_passages(texts)


def _check_choice(backend: str, precision: str) -> None:
    if backend not in BACKENDS:
        raise RagexpInputError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}", field="backend")
    if precision not in PRECISIONS:
        raise RagexpInputError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}", field="precision")
    if backend == "torch" and precision != "fp32":
        raise RagexpInputError(f"precision {precision!r} needs backend onnx; the torch backend runs fp32", field="precision")


def make_encoder(
    model: str, backend: str = "onnx", precision: str = "fp32", name: str | None = None, device: str = "auto", **options: Any
) -> Encoder:
    """The encoder for ``model`` on ``backend`` at ``precision`` on ``device`` (see the module
    docstring); ``options`` go to its constructor. ``name`` is the config group's label
    (``embedding=minilm``) and is ignored. An ``.onnx`` model runs on ONNX Runtime whatever
    ``backend`` says; the encoder's :attr:`identity` names the backend that encodes
    (:func:`effective_backend`)."""
    _check_choice(backend, precision)
    device = resolve_device(device)
    resolved = resolve_model(model)
    graph, export_length, reason = _plan(resolved, backend, device)
    if graph is None:
        if reason:
            if precision != "fp32":
                raise RagexpInputError(f"precision {precision!r} needs an ONNX export of {model!r}, which was refused: {reason}", field="precision")
            _note_once(model, reason)
        return SentenceTransformerEncoder(resolved, precision=precision, device=device, **options)
    if export_length is not None and options.get("max_seq_length") is None:  # the folder's own limit, as sentence-transformers keeps it
        options["max_seq_length"] = export_length
    if precision == "int8":
        graph = onnx_export.int8_graph(graph, resolved)
    if device != "cpu" and not onnx_cuda_available():
        _note_once(model, f"ONNX Runtime has no CUDA provider here (install onnxruntime-gpu) and {model!r} has no torch "
                          f"weights; it runs on the CPU, not {device}", "cpu")
        device = "cpu"
    return OnnxEncoder(resolved, graph=graph.path, tokenizer=graph.tokenizer, precision=precision, device=device,
                       export=None if resolved.kind == ONNX else onnx_export.EXPORT_VERSION, **options)


def effective_backend(model: str, backend: str = "onnx", precision: str = "fp32", device: str = "cpu") -> str:
    """The backend :func:`make_encoder` encodes ``model`` with when ``backend`` is configured:
    ``torch`` where the ONNX export of a sentence-transformers folder was refused, ``onnx`` for an
    ``.onnx`` model. Cheap once the encoder was built (the export verdict is on disk)."""
    _check_choice(backend, precision)
    graph, _, _ = _plan(resolve_model(model), backend, device)
    return "torch" if graph is None else "onnx"


def with_effective_backends(node: Any) -> Any:
    """``node`` (a component config) with the ``backend`` of every encoder block in it (a mapping
    with a ``model`` name and ``backend: onnx|torch``) replaced by :func:`effective_backend`, for
    stage-cache keys: a run configured ``onnx`` whose model fell back to torch computes what a
    ``torch`` run computes and shares its entries. A block whose model cannot be resolved stays as
    it is (building it failed already)."""
    if isinstance(node, Mapping):
        out = {key: with_effective_backends(value) for key, value in node.items()}
        if isinstance(out.get("model"), str) and out.get("backend") in BACKENDS:
            try:
                device = resolve_device(out.get("device") or "cpu")
                out["backend"] = effective_backend(out["model"], out["backend"], out.get("precision", "fp32"), device)
            except RagexpInputError:
                pass
        return out
    if isinstance(node, (list, tuple)):
        return [with_effective_backends(value) for value in node]
    return node


def build_encoder(spec: Mapping[str, Any] | Encoder, cache: Any = None) -> Encoder:
    """An encoder from config: a built :class:`Encoder`, a mapping with a registered ``_target_``, or a
    plain mapping for :func:`make_encoder`. With a stage cache, every text is encoded once per
    encoder identity (:class:`ragexp.runtime.text_vectors.CachedEncoder`)."""
    if isinstance(spec, Encoder):
        return with_text_vectors(spec, cache)
    config = dict(spec)
    if "_target_" in config:
        from hydra.utils import instantiate

        from ragexp.config.targets import check_component

        check_component(config, "encoder")  # a registered encoder class (Embedding), before any import
        return with_text_vectors(instantiate(config), cache)
    if "model" not in config:
        raise unloadable_model_error("<missing>", "the encoder config has no 'model'", field="encoder.model")
    return with_text_vectors(make_encoder(**config), cache)
