"""ONNX graphs for sentence encoders: exported once per model content, checked against torch, cached.

A sentence-transformers folder whose modules are ``Transformer -> Pooling(mean) [-> Normalize]``
is exported with ``torch.onnx.export`` (the transformer only: ``input_ids``, ``attention_mask``
[, ``token_type_ids``] -> last hidden state, batch and length dynamic; the masked mean is taken
outside the graph, as for any ONNX encoder). The transformer is traced with its eager attention
(:data:`EXPORT_VERSION`): the SDPA attention torch runs by default exports as a chain of
reshapes and masks ONNX Runtime runs 1.2x slower on 2 cores (SciFact abstracts,
``benchmarks/bench_encoders.py``); both give the same vectors (cosine >= 0.9999999). The export is kept only if it gives the same vectors:
``min cos(onnx(t), torch(t)) >= MIN_COSINE`` over :data:`PROBE_TEXTS` (short, long, truncated,
non-ASCII). Any other model (CLS pooling, Dense layers, a custom module) or a failed check is
refused with a reason; the caller falls back to torch.

``precision="int8"`` is ONNX Runtime's dynamic quantisation of the fp32 graph
(:data:`INT8_METHOD`: ``quantize_dynamic``, signed 8-bit weights scaled per output channel,
activations quantised per model input at run time, which the encoder makes one text, so a
vector does not depend on its batch; per-tensor weight scales gave a mean cosine to torch of
0.944 on demo passages, per-channel 0.994): lossy;
its retrieval cost is measured in ``benchmarks/bench_encoders.py`` and docs/pipelines.md.

Layout: ``<export root>/<EXPORT_VERSION>/<model fingerprint>/`` (:func:`ragexp.models.resolve.model_fingerprint`,
the SHA-256 over the model's files) holding ``model.onnx``, ``tokenizer.json``, ``check.json``
(the verdict and the cosine it measured; a refusal is stored too, so it is reached once per
machine) and, once asked for, ``model.int8.onnx``. The export root is ``$RAGEXP_ONNX_EXPORT_DIR``,
else ``$XDG_CACHE_HOME/ragexp/onnx`` (``~/.cache/ragexp/onnx``). Folders and files are published
by one rename: concurrent jobs may both export, one result is kept.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragexp.models.resolve import ResolvedModel, model_fingerprint
from ragexp.runtime.atomic_file import replacing
from ragexp.runtime.stage_cache import publish_dir, writing_cache

EXPORT_DIR_ENV = "RAGEXP_ONNX_EXPORT_DIR"
MIN_COSINE = 0.9999
#: How graphs are exported; part of the folder and of an exported encoder's identity (cache keys),
#: so vectors of an older export are never served for this one.
EXPORT_VERSION = "v2-eager-attention"
INT8_METHOD = "onnxruntime quantize_dynamic QInt8 per_channel, one text per run"  # part of an int8 encoder's identity
OPSET = 17
PROBE_TEXTS = (
    "A man is eating food.",
    "Cold.",
    "The glomerular filtration rate declined by 12% (95% CI 8-16) over two years in treated patients.",
    "Ärzte in München übersetzen 東京 reports — naïve café résumé.",
    " ".join(["Sourdough bread is leavened with a culture of wild yeast and lactic acid bacteria."] * 40),  # truncated
)


@dataclass(frozen=True)
class OnnxGraph:
    """An ONNX graph to run and the tokenizer that feeds it."""

    path: Path
    tokenizer: Path


@dataclass(frozen=True)
class Export:
    """The outcome for one model: ``graph`` when the export is usable, else ``None`` and ``reason``."""

    graph: OnnxGraph | None
    reason: str
    min_cosine: float | None = None
    max_seq_length: int | None = None  # the model folder's own limit (sentence-transformers' default)


def export_root() -> Path:
    configured = os.environ.get(EXPORT_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragexp" / "onnx"


def _folder(model: ResolvedModel) -> Path:
    return export_root() / EXPORT_VERSION / model_fingerprint(model)


#: ``encode(graph, max_seq_length, texts)``: the normalised vectors an encoder over ``graph`` gives
#: (the caller's ONNX encoder: :mod:`ragexp.models.encoders` imports this module, not the reverse).
GraphEncoder = Callable[[OnnxGraph, int | None, list[str]], np.ndarray]


def exported(model: ResolvedModel, encode: GraphEncoder) -> Export:
    """The checked fp32 ONNX export of a sentence-transformers folder, exported on first call;
    ``encode`` runs the exported graph for the check against torch."""
    folder = _folder(model)
    if not (folder / "check.json").is_file():
        with writing_cache(export_root()):
            publish_dir(folder, lambda staging: _export(model, staging, encode))
    verdict = json.loads((folder / "check.json").read_text("utf-8"))
    graph = OnnxGraph(folder / "model.onnx", folder / "tokenizer.json") if verdict["ok"] else None
    return Export(graph, verdict["reason"], verdict.get("min_cosine"), verdict.get("max_seq_length"))


def int8_graph(graph: OnnxGraph, model: ResolvedModel) -> OnnxGraph:
    """``graph`` with int8 weights (dynamic quantisation), quantised once into the model's folder."""
    folder = _folder(model)
    target = folder / "model.int8.onnx"
    if not target.is_file():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        folder.mkdir(parents=True, exist_ok=True)
        with writing_cache(export_root()), replacing(target) as partial:
            quantize_dynamic(str(graph.path), str(partial), weight_type=QuantType.QInt8, per_channel=True)
    return OnnxGraph(target, graph.tokenizer)


def _write_verdict(staging: Path, ok: bool, reason: str, min_cosine: float | None = None, max_seq_length: int | None = None) -> None:
    verdict = {"ok": ok, "reason": reason, "min_cosine": min_cosine, "max_seq_length": max_seq_length}
    (staging / "check.json").write_text(json.dumps(verdict), "utf-8")


def _export(model: ResolvedModel, staging: Path, encode: GraphEncoder) -> None:
    """Export into ``staging`` and write the verdict (a refusal leaves only ``check.json``)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer

    try:
        st = SentenceTransformer(str(model.path), device="cpu", local_files_only=True)
    except (OSError, ValueError) as err:
        return _write_verdict(staging, False, f"not a sentence-transformers model ({err})")
    modules = list(st)
    shape_ok = (
        len(modules) >= 2 and isinstance(modules[0], Transformer) and isinstance(modules[1], Pooling)
        and _pooling_mode(modules[1]) == "mean" and all(isinstance(m, Normalize) for m in modules[2:])
    )
    if not shape_ok:
        names = " -> ".join(f"{type(m).__name__}({_pooling_mode(m)})" if isinstance(m, Pooling) else type(m).__name__ for m in modules)
        return _write_verdict(staging, False, f"only Transformer -> Pooling(mean) [-> Normalize] is exported, this model is {names}")
    tokenizer = modules[0].tokenizer
    if (model.path / "tokenizer.json").is_file():
        shutil.copyfile(model.path / "tokenizer.json", staging / "tokenizer.json")
    elif getattr(tokenizer, "is_fast", False):
        tokenizer.backend_tokenizer.save(str(staging / "tokenizer.json"))
    else:
        return _write_verdict(staging, False, "its tokenizer has no tokenizer.json (not a fast tokenizer)")
    try:
        _torch_export(modules[0], staging / "model.onnx")
    except Exception as err:  # noqa: BLE001 - any exporter failure means "use torch"
        (staging / "model.onnx").unlink(missing_ok=True)
        return _write_verdict(staging, False, f"torch.onnx.export failed ({type(err).__name__}: {str(err)[:200]})")
    min_cosine = _probe_cosine(st, OnnxGraph(staging / "model.onnx", staging / "tokenizer.json"), encode)
    if min_cosine < MIN_COSINE:
        (staging / "model.onnx").unlink()
        return _write_verdict(staging, False, f"ONNX vectors differ from torch's (min cosine {min_cosine:.6f} < {MIN_COSINE})", min_cosine)
    _write_verdict(staging, True, f"ONNX export matches torch (min cosine {min_cosine:.6f} over {len(PROBE_TEXTS)} probe texts)",
                   min_cosine, st.max_seq_length)


def _pooling_mode(pooling) -> str:
    """``"mean"``, ``"cls"``, ...: sentence-transformers >= 6 keeps it in ``pooling_mode``, older ones behind a getter."""
    mode = getattr(pooling, "pooling_mode", None)
    return str(mode) if mode is not None else pooling.get_pooling_mode_str()


def _torch_export(transformer, path: Path) -> None:
    import inspect

    import torch

    hf_model = transformer.auto_model.eval()
    default_attention = hf_model.config._attn_implementation
    sample = transformer.tokenizer(["a short probe", "a somewhat longer probe sentence"], padding=True, return_tensors="pt")
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf_model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs))).last_hidden_state

    options = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    hf_model.set_attn_implementation("eager")  # EXPORT_VERSION; the probe then compares with the default attention
    try:
        with torch.no_grad():
            torch.onnx.export(
                LastHidden(), tuple(sample[name] for name in names), str(path),
                input_names=names, output_names=["last_hidden_state"], opset_version=OPSET,
                dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names}, "last_hidden_state": {0: "batch", 1: "tokens"}},
                **options,
            )
    finally:
        hf_model.set_attn_implementation(default_attention)


def _probe_cosine(st, graph: OnnxGraph, encode: GraphEncoder) -> float:
    reference = np.asarray(st.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True), dtype=np.float64)
    vectors = np.asarray(encode(graph, st.max_seq_length, list(PROBE_TEXTS)), dtype=np.float64)
    return float(np.min(np.sum(reference * vectors, axis=1)))
