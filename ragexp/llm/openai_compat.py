"""A chat model behind any OpenAI-compatible ``/chat/completions`` endpoint.

One plain ``httpx`` POST per attempt to ``{base_url}/chat/completions``; works with OpenAI,
vLLM (``http://host:8000/v1``), Ollama (``http://localhost:11434/v1``) and the llama.cpp server
(``http://localhost:8080/v1``).

- The API key is read only from the environment variable named by ``api_key_env``, never from a
  config value; it is kept out of ``repr``, :meth:`OpenAIChatModel.params` and every error
  message (redacted even when an endpoint echoes it back in an error body). Without the
  variable no ``Authorization`` header is sent (local servers need none).
- Every request has a timeout (connect, read, write, pool: ``timeout_s`` each).
- Timeouts, connection errors, 429 and 5xx are retried with :class:`~ragexp.llm.retry.BackoffPolicy`
  (429 honours ``Retry-After``); other 4xx fail at once; a body that is not JSON or lacks
  ``choices[0].message.content`` fails at once as ``malformed``. Every failure raises
  :class:`~ragexp.llm.base.LLMCallError` and is counted in :attr:`OpenAIChatModel.stats`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from ragexp.llm.base import LLMCallError, LLMResponse, Prompt, as_messages
from ragexp.llm.call_cache import CallCache, cached_call
from ragexp.llm.retry import BackoffPolicy, is_retryable, parse_retry_after
from ragexp.stored.urls import canonical_url


@dataclass
class CallStats:
    """Counters of one model client. ``calls`` counts requests answered by the endpoint
    (cache hits excluded); ``retries`` counts repeated requests; ``failures`` counts calls that
    raised, by :class:`LLMCallError` kind; tokens are those the endpoint reported."""

    calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict:
        return {
            "calls": self.calls,
            "retries": self.retries,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "failures": dict(self.failures),
        }


class _AttemptFailed(Exception):
    def __init__(self, kind: str, message: str, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s


class OpenAIChatModel:
    """:class:`~ragexp.llm.base.ChatModel` over HTTP. ``model_id`` is the ``model`` name."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        cache: CallCache | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        # The canonical spelling checked by the one URL policy is the one the client is given.
        self.base_url = canonical_url(base_url, field="base_url").text.rstrip("/")
        self.model = model
        self.model_id = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.policy = BackoffPolicy(max_retries, backoff_base_s, backoff_max_s)
        self.cache = cache
        self.stats = CallStats()
        self._api_key = os.environ.get(api_key_env) or None
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s))

    def __repr__(self) -> str:
        key_state = "<redacted>" if self._api_key else "<unset>"
        return (
            f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r}, api_key={key_state}, timeout_s={self.timeout_s})"
        )

    def params(self) -> dict:
        """The settings to log (never the key itself)."""
        return {
            "backend": "openai",
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout_s,
            "max_retries": self.policy.max_retries,
            "backoff_base_s": self.policy.backoff_base_s,
            "backoff_max_s": self.policy.backoff_max_s,
        }

    def _redact(self, text: str) -> str:
        """``text`` with the API key replaced, for every message that can leave this object."""
        return text.replace(self._api_key, "<redacted>") if self._api_key else text

    def close(self) -> None:
        self._client.close()

    def complete(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> LLMResponse:
        messages = as_messages(prompt)
        body: dict = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
        if stop:
            body["stop"] = list(stop)
        cache_params = {"endpoint": self.base_url, "max_tokens": max_tokens, "temperature": temperature, "stop": stop}
        response = cached_call(self.cache, self.model_id, messages, cache_params, lambda: self._post_with_retries(body))
        if response.cached:
            with self._lock:
                self.stats.cache_hits += 1
        return response

    def _post_with_retries(self, body: dict) -> LLMResponse:
        attempts = 0
        while True:
            attempts += 1
            started = time.perf_counter()
            try:
                response = self._attempt(body, started)
            except _AttemptFailed as failure:
                retry_index = attempts - 1
                if not is_retryable(failure.kind, failure.status) or retry_index >= self.policy.max_retries:
                    with self._lock:
                        self.stats.failures[failure.kind] += 1
                    message = self._redact(str(failure))
                    raise LLMCallError(failure.kind, message, attempts=attempts, status=failure.status) from None
                with self._lock:
                    self.stats.retries += 1
                time.sleep(self.policy.delay(retry_index, failure.retry_after_s))
                continue
            with self._lock:
                self.stats.calls += 1
                self.stats.prompt_tokens += response.prompt_tokens
                self.stats.completion_tokens += response.completion_tokens
            return response

    def _attempt(self, body: dict, started: float) -> LLMResponse:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        try:
            reply = self._client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as err:
            raise _AttemptFailed("timeout", f"no answer from {url} within {self.timeout_s}s ({type(err).__name__})")
        except httpx.TransportError as err:
            raise _AttemptFailed("connection", f"{url}: {type(err).__name__}: {self._redact(str(err))}")
        status = reply.status_code
        if status >= 500:
            raise _AttemptFailed("http_5xx", f"{url} answered HTTP {status}", status)
        if status >= 400:
            retry_after = parse_retry_after(reply.headers.get("Retry-After")) if status == 429 else None
            detail = self._redact(reply.text)[:200].replace("\n", " ")  # some endpoints echo the key they refuse
            raise _AttemptFailed("http_4xx", f"{url} answered HTTP {status}: {detail}", status, retry_after)
        return self._parse(reply, url, time.perf_counter() - started)

    def _parse(self, reply: httpx.Response, url: str, latency_s: float) -> LLMResponse:
        try:
            payload = reply.json()
            text = payload["choices"][0]["message"]["content"]
            finish_reason = payload["choices"][0].get("finish_reason")
            usage = payload.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            raise _AttemptFailed("malformed", f"{url}: unusable response body ({type(err).__name__}: {err})")
        if not isinstance(text, str):
            raise _AttemptFailed("malformed", f"{url}: choices[0].message.content is {type(text).__name__}, not text")
        return LLMResponse(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached=False,
            model=str(payload.get("model") or self.model),
            latency_s=latency_s,
            finish_reason=finish_reason if finish_reason in ("stop", "length") else None,
        )
