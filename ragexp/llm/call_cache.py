"""A disk cache of model calls: a second identical run makes zero calls.

An entry's key is ``stable_hash({"model_id", "template", "messages", "params"})`` where
``template`` names the prompt template and its version (e.g. ``"grounded_qa@v1"``, ``""`` for
raw calls), ``messages`` are the full chat messages sent, and ``params`` every setting that
changes the output (max_tokens, temperature, stop, endpoint). Each entry is one JSON file
``<root>/<key[:2]>/<key>.json`` holding the key parts and the :class:`LLMResponse`; it is
written whole or not at all (:mod:`ragexp.runtime.atomic_file`), so readers see whole entries or
none. An unreadable entry is a miss (and is overwritten by the fresh call), never trusted.
Only JSON is read back, never pickle. Every response made or read back is reported to the token
meter (:mod:`ragexp.llm.usage`); inside :func:`ragexp.runtime.uncached.uncached` (a call timed for
its latency) the cache is neither read nor written.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragexp.llm.base import LLMCallError, LLMResponse
from ragexp.runtime.atomic_file import atomic_write
from ragexp.runtime.fingerprint import canonical_json, stable_hash
from ragexp.llm.usage import record
from ragexp.runtime.stage_cache import writing_cache
from ragexp.runtime.uncached import bypassing

_RESPONSE_FIELDS = ("text", "prompt_tokens", "completion_tokens", "model", "latency_s")
_OPTIONAL_FIELDS = ("finish_reason",)  # absent from entries written before it existed


class CallCache:
    """Response store keyed by everything that determines a model's output.

    ``template`` is mixed into every key, so two prompt templates (or two versions of one)
    never share entries. Counters ``hits`` and ``misses`` count lookups.
    """

    def __init__(self, root: str | os.PathLike[str], template: str = "") -> None:
        self.root = Path(root)
        self.template = template
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def key_parts(self, model_id: str, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
        return {"model_id": model_id, "template": self.template, "messages": messages, "params": params}

    def path_for(self, parts: dict[str, Any]) -> Path:
        key = stable_hash(parts)
        return self.root / key[:2] / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> LLMResponse | None:
        """The stored response for ``parts`` with ``cached=True``, or ``None``."""
        path = self.path_for(parts)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            stored = entry["response"]
            fields = {name: stored[name] for name in _RESPONSE_FIELDS}
            fields.update({name: stored[name] for name in _OPTIONAL_FIELDS if name in stored})
            response = LLMResponse(cached=True, **fields)
            found = entry["key"] == json.loads(canonical_json(parts))
        except (OSError, ValueError, KeyError, TypeError):
            found = False
        with self._lock:
            if found:
                self.hits += 1
            else:
                self.misses += 1
        return response if found else None

    def put(self, parts: dict[str, Any], response: LLMResponse) -> None:
        path = self.path_for(parts)
        stored = {name: getattr(response, name) for name in (*_RESPONSE_FIELDS, *_OPTIONAL_FIELDS)}
        payload = canonical_json({"key": parts, "response": stored})
        with writing_cache(self.root):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, payload)


def cached_call(
    cache: CallCache | None,
    model_id: str,
    messages: list[dict],
    params: dict[str, Any],
    call: Callable[[], LLMResponse],
) -> LLMResponse:
    """Serve ``call()`` from ``cache`` when an identical call was made before; else make it and
    store the response. A failed call raises and stores nothing."""
    if cache is None or bypassing():
        return _recorded(model_id, call())
    parts = cache.key_parts(model_id, messages, params)
    stored = cache.get(parts)
    if stored is not None:
        return _recorded(model_id, stored)
    response = call()
    cache.put(parts, response)
    return _recorded(model_id, response)


def _recorded(model_id: str, response: LLMResponse | LLMCallError) -> LLMResponse | LLMCallError:
    """``response``, its tokens reported to the meter (:mod:`ragexp.llm.usage`) when it is one."""
    if isinstance(response, LLMResponse):
        record(model_id, response.prompt_tokens, response.completion_tokens)
    return response


def cached_batch(
    cache: CallCache | None,
    model_id: str,
    conversations: Sequence[list[dict]],
    params: dict[str, Any],
    call_many: Callable[[list[list[dict]]], list[LLMResponse | LLMCallError]],
) -> list[LLMResponse | LLMCallError]:
    """:func:`cached_call` for many conversations: the cached ones are served from ``cache``,
    the rest go to ``call_many`` in one call (in order); its successes are stored, its
    failures (returned as :class:`LLMCallError`) are passed on and stored nowhere."""
    if bypassing():
        cache = None
    results: list[LLMResponse | LLMCallError | None] = [None] * len(conversations)
    parts = [cache.key_parts(model_id, messages, params) for messages in conversations] if cache else []
    if cache is not None:
        results = [cache.get(p) for p in parts]
    todo = [i for i, result in enumerate(results) if result is None]
    if todo:
        for i, response in zip(todo, call_many([conversations[i] for i in todo])):
            results[i] = response
            if cache is not None and isinstance(response, LLMResponse):
                cache.put(parts[i], response)
    return [_recorded(model_id, result) for result in results]
