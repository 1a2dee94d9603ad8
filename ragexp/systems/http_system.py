"""``system=http``: one POST per eval query to the team's endpoint.

Request body: ``{<query_field>: query, **extra}`` (``system.request``). Time is bounded three ways:

- ``timeout_s`` bounds each attempt WHOLE, from connecting to the last byte of the body: a
  watchdog (:class:`_Watchdog`) shuts the attempt's socket down when it is up, so an endpoint
  that drips its answer a byte at a time is cut off like a silent one (``timeout``); each
  connection serves one request (no keep-alive), so the socket is the attempt's own;
- ``query_timeout_s`` bounds one query's attempts and backoff waits together: no attempt starts
  and none runs past it (a hung endpoint costs a query at most this);
- the run's deadline and failure cap are :func:`ragexp.systems.fetch.fetch_all`'s.

Timeouts, refused connections, 429 and 5xx are retried with
:class:`~ragexp.llm.retry.BackoffPolicy` (``max_retries``, jittered exponential backoff,
``Retry-After`` honoured up to ``backoff_max_s``); other 4xx fail at once, and a redirect (3xx) is
never followed: it fails as ``redirect``, naming where it pointed.
``rate_limit_per_s`` spaces request starts across all concurrent workers. The body is read
streaming and refused past ``max_response_bytes`` (``too_large``), decoded as UTF-8 and parsed
within the JSON bounds of :mod:`ragexp.stored.limits` (``malformed`` otherwise).

The auth secret comes only from the environment variable ``secret_env`` names, on this machine:
it is sent as ``<auth_header>: <auth_scheme> <secret>``, never logged, never part of the cache
identity, and redacted from every error. The URL is checked like a model ``base_url``: an http(s)
URL with a host, and in a config not typed here (``ragexp reproduce``) one this machine allows
(:mod:`ragexp.config.endpoints`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from ragexp.datamodel import EvalItem
from ragexp.errors import RagexpInputError
from ragexp.llm.retry import BackoffPolicy, is_retryable, parse_retry_after
from ragexp.stored.limits import parse_json
from ragexp.systems.response import ResponseFields, SystemCallError


class HttpSystem:
    """The team's endpoint (module docstring); ``call`` is thread-safe."""

    kind = "http"

    def __init__(self, url: str, fields: ResponseFields, *, query_field: str = "query", extra: Mapping[str, Any] | None = None,
                 concurrency: int = 4, timeout_s: float = 30.0, query_timeout_s: float = 60.0, max_retries: int = 3,
                 backoff_base_s: float = 0.5,
                 backoff_max_s: float = 10.0, rate_limit_per_s: float | None = None,
                 max_response_bytes: int = 8_000_000, secret_env: str | None = None,
                 auth_header: str = "Authorization", auth_scheme: str = "Bearer", version: str | None = None) -> None:
        parts = urlsplit(url or "")
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise RagexpInputError(f"must be the http(s) URL of your system's endpoint, got {url!r}", field="system.url")
        if extra and query_field in extra:
            raise RagexpInputError(f"sets {query_field!r}, the field the query goes in", field="system.request.extra")
        self.url, self.fields, self.query_field, self.extra = url, fields, query_field, dict(extra or {})
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.query_timeout_s = query_timeout_s
        self.policy = BackoffPolicy(max_retries, backoff_base_s, backoff_max_s)
        self.rate_limit_per_s = rate_limit_per_s
        self.max_response_bytes = max_response_bytes
        self.secret_env, self.auth_header, self.auth_scheme = secret_env, auth_header, auth_scheme
        self.version = version
        self._secret = os.environ.get(secret_env) if secret_env else None
        if secret_env and not self._secret:
            raise RagexpInputError(f"names ${secret_env}, which is not set on this machine (export the secret there)",
                                   field="system.secret_env")
        self._client: httpx.Client | None = None
        logging.getLogger("httpx").setLevel(logging.WARNING)  # else one INFO line per request on the terminal
        self._lock = threading.Lock()
        self._next_start = 0.0

    def __repr__(self) -> str:
        return f"HttpSystem(url={self.url!r}, secret_env={self.secret_env!r}, secret={'<redacted>' if self._secret else '<unset>'})"

    def identity(self) -> dict:
        """What the responses depend on, as far as ragexp can tell: endpoint, request shape and
        the version label (never the secret)."""
        return {"kind": self.kind, "url": self.url, "query_field": self.query_field, "extra": self.extra,
                "version": self.version}

    def label(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"

    def request(self, item: EvalItem) -> dict:
        return {self.query_field: item.query, **self.extra}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "<redacted>") if self._secret else text

    def _wait_for_slot(self) -> None:
        """Space request starts ``1 / rate_limit_per_s`` apart across all workers."""
        if not self.rate_limit_per_s:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_start)
            self._next_start = start + 1.0 / self.rate_limit_per_s
        if start > now:
            time.sleep(start - now)

    def call(self, request: dict) -> tuple[Any, float, int]:
        """``(parsed JSON body, latency in ms of the answered attempt, attempts)``; raises
        :class:`SystemCallError` after the retries or when ``query_timeout_s`` is spent."""
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout_s),
                                            limits=httpx.Limits(max_keepalive_connections=0))
        query_deadline = time.monotonic() + self.query_timeout_s
        attempts = 0
        while True:
            attempts += 1
            self._wait_for_slot()
            started = time.perf_counter()
            try:
                payload = self._attempt(request, min(self.timeout_s, query_deadline - time.monotonic()))
                return payload, (time.perf_counter() - started) * 1000.0, attempts
            except _Attempt as failure:
                retry = attempts - 1
                delay = self.policy.delay(retry, failure.retry_after_s)
                spent = time.monotonic() + delay >= query_deadline
                if not is_retryable(failure.kind, failure.status) or retry >= self.policy.max_retries or spent:
                    within = f" (system.query_timeout_s={self.query_timeout_s:g} spent)" if spent and \
                        is_retryable(failure.kind, failure.status) and retry < self.policy.max_retries else ""
                    raise SystemCallError(failure.kind, f"{self._redact(str(failure))} after {attempts} attempt(s){within}",
                                          attempts) from None
                time.sleep(delay)

    def _attempt(self, request: dict, seconds: float) -> Any:
        headers = {self.auth_header: f"{self.auth_scheme} {self._secret}".strip()} if self._secret else {}
        watchdog = _Watchdog(max(seconds, 0.001))
        timed_out = _Attempt("timeout", f"{self.url} did not finish answering within {seconds:.3g}s (system.timeout_s bounds "
                                        "the whole request)")
        try:
            with self._client.stream("POST", self.url, json=request, headers=headers,
                                     extensions={"trace": watchdog.trace}) as reply:
                status = reply.status_code
                if 300 <= status < 400:
                    where = _printable(reply.headers.get("Location", ""))
                    raise _Attempt("redirect", f"{self.url} answered HTTP {status}, a redirect to {where or '(no Location)'}, "
                                               "which is never followed: set system.url to the endpoint itself", status)
                if status >= 400:
                    detail = self._redact(reply.read()[:2000].decode("utf-8", "replace"))[:200].replace("\n", " ")
                    retry_after = parse_retry_after(reply.headers.get("Retry-After")) if status == 429 else None
                    kind = "http_5xx" if status >= 500 else "http_4xx"
                    raise _Attempt(kind, f"{self.url} answered HTTP {status}: {_printable(detail)}", status, retry_after)
                body = bytearray()
                for chunk in reply.iter_bytes():
                    body += chunk
                    if watchdog.expired:
                        raise timed_out
                    if len(body) > self.max_response_bytes:
                        raise _Attempt("too_large", f"{self.url} sent more than {self.max_response_bytes:,} bytes "
                                                    "(system.max_response_bytes)")
        except httpx.TimeoutException as err:
            raise _Attempt("timeout", f"no answer from {self.url} within {self.timeout_s}s ({type(err).__name__})") from None
        except httpx.TransportError as err:
            if watchdog.expired:
                raise timed_out from None
            if isinstance(err, httpx.RemoteProtocolError) and "location header" in str(err):
                # httpx reads a redirect's Location even when it does not follow it, and refuses a bad one
                raise _Attempt("redirect", f"{self.url} answered with a redirect to an invalid Location "
                                           f"({_printable(str(err))}), which is never followed: set system.url to the "
                                           "endpoint itself") from None
            raise _Attempt("connection", f"cannot reach {self.url} ({type(err).__name__}: {err})") from None
        finally:
            watchdog.cancel()
        if watchdog.expired:
            raise timed_out
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise _Attempt("malformed", f"{self.url} sent a body that is not UTF-8") from None
        try:
            return parse_json(text, source=self.url)
        except RagexpInputError as err:
            raise _Attempt("malformed", f"{self.url} sent a body that is not usable JSON ({err.message})") from None


def _printable(text: str, limit: int = 200) -> str:
    """Untrusted text for one terminal line: control characters (escape codes included) as ``?``, cut at ``limit``."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return cleaned + ("..." if len(text) > limit else "")


class _Watchdog:
    """Shuts down the sockets of one attempt (seen through httpcore's ``trace`` extension as they
    connect) once ``seconds`` have passed, which ends a read blocked on them at once."""

    CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict) -> None:
        if event in self.CONNECTED:
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with self._lock:
                    self._sockets.append(sock)
                    if self.expired:
                        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed already


class _Attempt(Exception):
    def __init__(self, kind: str, message: str, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.status, self.retry_after_s = kind, status, retry_after_s
