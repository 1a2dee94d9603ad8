"""A team's RAG system behind a real HTTP endpoint, for tests: uvicorn on 127.0.0.1, ephemeral port.

``serve(answer)`` runs a FastAPI app whose ``POST /search`` calls ``answer(body)`` (or
``answer(body, headers)``) with the JSON body and sends what it returns: a JSON value (status 200), or a :class:`Raw` reply (any status,
raw bytes, a delay before answering, a body dripped a byte at a time, extra headers) for the bad-input cases. Every request is counted
(``server.hits``, ``server.bodies``), so a test can assert exactly how many reached the system.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass(frozen=True)
class Raw:
    body: bytes = b""
    status: int = 200
    delay_s: float = 0.0
    content_type: str = "application/json"
    drip_s: float = 0.0  # > 0: the body is sent one byte every drip_s seconds (a slow-drip endpoint)
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class SystemServer:
    url: str
    hits: int = 0
    bodies: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def _app(answer: Callable[[dict], Any], server: SystemServer) -> FastAPI:
    app = FastAPI()
    lock = threading.Lock()
    takes_body_only = len(inspect.signature(answer).parameters) == 1  # else (body, headers)

    @app.post("/search")
    async def search(request: Request) -> Response:
        body = await request.json()
        with lock:
            server.hits += 1
            server.bodies.append(body)
            server.headers.append(dict(request.headers))
        reply = answer(body) if takes_body_only else answer(body, dict(request.headers))
        if isinstance(reply, Raw):
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)  # the client's timeout fires first
            if reply.drip_s:
                async def drip() -> AsyncIterator[bytes]:
                    for byte in reply.body:
                        yield bytes([byte])
                        await asyncio.sleep(reply.drip_s)

                return StreamingResponse(drip(), status_code=reply.status, media_type=reply.content_type,
                                         headers=dict(reply.headers))
            return Response(reply.body, status_code=reply.status, media_type=reply.content_type, headers=dict(reply.headers))
        return JSONResponse(reply)

    return app


@contextlib.contextmanager
def serve(answer: Callable[[dict], Any], port: int = 0) -> Iterator[SystemServer]:
    """The endpoint at ``server.url`` while the block runs (module docstring); ``port``: a given
    one (a system restarted where it was), else an ephemeral one."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    server = SystemServer(url=f"http://127.0.0.1:{port}/search")
    config = uvicorn.Config(_app(answer, server), log_level="warning", lifespan="off")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test system server did not start")
        time.sleep(0.02)
    try:
        yield server
    finally:
        running.should_exit = True
        thread.join(timeout=10)
        sock.close()
