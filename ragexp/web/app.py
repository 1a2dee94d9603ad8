"""The local web app every ragexp page runs in.

``create_app(routers, home)`` builds a FastAPI app from the page's routers, serves
``ragexp/web/static/`` under ``/static`` (shared CSS and JS, no build step) and the page's HTML at
``/``; requests another web site could have made (a rebound DNS name in ``Host``, a write from
another origin) are refused (:mod:`ragexp.web.local_only`). Every response carries
:data:`SECURITY_HEADERS`: a Content-Security-Policy allowing only this server's own scripts,
styles and connections (no inline script or style, no other origin: even text that slipped
into the page as markup could neither run nor send anything elsewhere), ``nosniff`` and no
referrer. The pages themselves put every value into the DOM as text nodes
(``static/text.js``). ``reserve_port(port)`` binds 127.0.0.1 before anything slow happens; a taken port raises
:class:`ragexp.errors.RagexpInputError` (one line, exit 2, as ``ragexp ui``). ``serve(app, port)``
prints the URL and runs uvicorn on that socket until Ctrl+C or SIGTERM. The socket is bound by this
process and handed to uvicorn, so no other program can take the port between check and serve, and
the printed URL always reaches this server.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterable
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.web.browser_ports import check_browser_port, next_open_port
from ragexp.web.local_only import LocalOnly

STATIC_DIR = Path(__file__).resolve().parent / "static"
LOOPBACK = "127.0.0.1"
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer"}


def create_app(routers: Iterable, home: Path | str, *, title: str = "ragexp"):
    """A FastAPI app: each router included, ``/static`` from :data:`STATIC_DIR`, and ``home`` (an
    HTML file, or a file name in :data:`STATIC_DIR`) at ``/``, never cached so a restarted server's
    page is always the current one."""
    from fastapi import FastAPI
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles

    home_path = Path(home) if Path(home).is_absolute() else STATIC_DIR / home
    if not home_path.is_file():
        raise FileNotFoundError(home_path)
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(LocalOnly)

    @app.middleware("http")
    async def security_headers(request, call_next):  # noqa: ANN001 - Starlette's signature
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    for router in routers:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(home_path, media_type="text/html", headers={"Cache-Control": "no-store"})

    @app.get("/health", include_in_schema=False)
    def health() -> dict:
        return {"ok": True}

    return app


def reserve_port(port: int, host: str = LOOPBACK) -> socket.socket:
    """A listening socket on ``host:port``; :class:`RagexpInputError` naming the port when it is
    taken, not a port, or one browsers refuse (:mod:`ragexp.web.browser_ports`; call it first: the
    command fails before loading anything)."""
    if not 0 <= port < 65536:  # 0: any free port (tests)
        raise RagexpInputError(f"{port} is not a TCP port (1-65535)", field="--port")
    check_browser_port(port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise RagexpInputError(f"port {port} on {host} is already in use ({err.strerror}); stop what runs there or "
                               f"pick another port, e.g. --port {next_open_port(port)}", field="--port") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}/"


def serve(app, port: int | socket.socket, *, what: str = "ragexp page") -> int:
    """Serve ``app`` on 127.0.0.1 (``port``: a number, or a socket from :func:`reserve_port`),
    printing the URL once the socket listens; returns 0 after Ctrl+C or SIGTERM."""
    import uvicorn

    sock = port if isinstance(port, socket.socket) else reserve_port(port)
    print(f"{what}: {url_of(sock)}\n(Ctrl+C to stop)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    sys.stdout.flush()
    return 0
