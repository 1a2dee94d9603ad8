"""A real HTTP server speaking the OpenAI ``/chat/completions`` protocol, for tests.

It listens on 127.0.0.1 on an ephemeral port and answers each request with the next scripted
:class:`Reply`; when the script is empty it answers ``200`` with ``"echo: <last message>"``.
Every request is counted and recorded (path, headers, JSON body, its size in bytes), so tests can
assert exactly how many calls reached the endpoint and recompute the usage it reported
(:func:`reported_usage`). Sleeping replies wake up at shutdown, so a test never
waits on a stuck handler.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``kind``: ``ok`` | ``status`` | ``malformed`` | ``drop``;
    ``delay_s`` is slept before answering (longer than the client timeout = a timeout)."""

    kind: str = "ok"
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def ok(text: str) -> Reply:
    return Reply("ok", text=text)


def status(code: int, headers: dict[str, str] | None = None) -> Reply:
    return Reply("status", status=code, headers=headers or {})


def too_many_requests(retry_after: str) -> Reply:
    return status(429, {"Retry-After": retry_after})


def malformed() -> Reply:
    return Reply("malformed")


def dropped() -> Reply:
    return Reply("drop")


def slow(delay_s: float, text: str = "late") -> Reply:
    return Reply("ok", text=text, delay_s=delay_s)


def completion_body(text: str, model: str, prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def reported_usage(request: dict, reply_text: str = "") -> tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` the server reported for a recorded ``ok`` request:
    a quarter of the request's bytes, and the words of the answer (the echo when unscripted)."""
    text = reply_text or "echo: " + str(request["body"].get("messages", [{}])[-1].get("content", ""))
    return request["raw_bytes"] // 4, len(text.split())


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        body = json.loads(raw) if raw else {}
        reply = self.server.fake.record(self.path, dict(self.headers), body, len(raw))
        if reply.delay_s and self.server.fake.stopping.wait(reply.delay_s):
            return
        if reply.kind == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.kind == "malformed":
            self._send(200, b'{"choices": [', {"Content-Type": "application/json"})
        elif reply.kind == "status":
            self._send(reply.status, b'{"error": {"message": "scripted"}}', reply.headers)
        else:
            text = reply.text or "echo: " + str(body.get("messages", [{}])[-1].get("content", ""))
            prompt_tokens, completion_tokens = reported_usage({"raw_bytes": len(raw), "body": body}, text)
            payload = completion_body(text, body.get("model", "fake"), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
            self._send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def _send(self, code: int, payload: bytes, headers: dict[str, str]) -> None:
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAIServer


class FakeOpenAIServer:
    """Context manager: ``with FakeOpenAIServer() as server: server.script(ok("hi")); ... server.base_url``."""

    def __init__(self) -> None:
        self.hits = 0
        self.requests: list[dict] = []
        self.stopping = threading.Event()
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def record(self, path: str, headers: dict[str, str], body: dict, raw_bytes: int = 0) -> Reply:
        with self._lock:
            self.hits += 1
            self.requests.append({"path": path, "headers": headers, "body": body, "raw_bytes": raw_bytes})
            return self._script.popleft() if self._script else Reply("ok")

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
