"""Chat models from config; which files a model name means is :mod:`ragexp.models.resolve`' job.

:func:`build_chat_model` turns a config mapping into a :class:`~ragexp.llm.base.ChatModel`::

    {backend: local, model: smollm2-135m, gguf_file: null, device: cpu, dtype: float32,
     quantization: none, threads: auto, batch_size: 8, cache_dir: null, repeat_ngram: null}
    {backend: openai, base_url: http://localhost:8000/v1, model: NAME, api_key_env: OPENAI_API_KEY,
     timeout_s: 30, max_retries: 4, backoff_base_s: 0.5, backoff_max_s: 20}

``backend`` defaults to ``openai`` when ``base_url`` is given, else ``local``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragexp.config.secrets import check_env_var_name
from ragexp.errors import RagexpInputError
from ragexp.llm.base import ChatModel
from ragexp.llm.call_cache import CallCache

_LOCAL_KEYS = {"backend", "model", "gguf_file", "device", "dtype", "quantization", "threads", "batch_size", "cache_dir",
               "repeat_ngram"}
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
    if "api_key_env" in spec:
        check_env_var_name(spec["api_key_env"], "api_key_env")
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
