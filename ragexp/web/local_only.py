"""Only this machine's browser tabs on this server's own origin may use a ragexp page.

Listening on 127.0.0.1 keeps other machines out, but not other web sites open in the same browser:

- **DNS rebinding**: a site whose name first resolves to its own server and then to 127.0.0.1
  becomes "same origin" with the page and could read the eval set and write to it. Such requests
  carry the site's name in ``Host``; every request whose ``Host`` is not ``127.0.0.1``,
  ``localhost`` or ``[::1]`` (any port) is refused with 400.
- **Cross-site writes** (CSRF): a page on another origin (another site, or another port on this
  machine) may send a POST without the page's consent. Browsers send ``Origin`` with every request
  that is not a GET/HEAD; a write whose ``Origin`` is not ``http://<Host>`` is refused with 403.
  A request without ``Origin`` (curl, a script run by the user) is allowed: no browser sent it
  on a site's behalf.
- **Huge bodies**: a write's body is read up to :data:`MAX_BODY_BYTES` (1 MiB, far above any
  page's change); a longer one is refused with 413 before the page's code sees it, so no
  multi-megabyte "answer" lands in the files.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = 1 << 20


def host_name(host: str) -> str | None:
    """The name part of a ``Host`` header value (``[::1]:5050`` -> ``::1``); ``None`` when malformed."""
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:
        return None
    return name


class LocalOnly:
    """ASGI middleware refusing requests that another site could have made (module docstring)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if host_name(host) not in LOOPBACK_NAMES:
            await _refuse(send, 400, f"Host {host!r} is not this machine: open the page at the URL ragexp printed "
                                     "(http://127.0.0.1:PORT/)")
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None and origin.lower() != f"http://{host}".lower():
            await _refuse(send, 403, f"a page on {origin!r} may not change this page's files (only http://{host} may)")
            return
        if scope["method"] not in SAFE_METHODS:
            receive = await _bounded_body(receive)
            if receive is None:
                await _refuse(send, 413, f"the request body is larger than {MAX_BODY_BYTES:,} bytes; nothing was written")
                return
        await self.app(scope, receive, send)


async def _bounded_body(receive):
    """The body read whole (at most :data:`MAX_BODY_BYTES`) and a ``receive`` replaying it; ``None`` when longer."""
    body, more = bytearray(), True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: let the app see it
            break
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_BODY_BYTES:
            return None
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}
        return await receive()

    return replay


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
