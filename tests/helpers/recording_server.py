"""An attacker's HTTP server on 127.0.0.1 for the security tests: it answers every GET, PUT and
POST with 404 and records ``"METHOD PATH AUTHORIZATION"`` of each request, so a test can show that
nothing (and no credential) reached it."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class RecordingHandler(BaseHTTPRequestHandler):
    """Records each request in the class's ``seen`` list; use :func:`recording_handler` for a class
    (and list) of a test module's own."""

    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append(f"{self.command} {self.path} {self.headers.get('Authorization') or ''}")
        self.send_response(404)
        self.end_headers()

    do_PUT = do_POST = do_GET  # noqa: N815

    def log_message(self, *args):  # noqa: ANN002 - silence
        pass


def recording_handler() -> type[RecordingHandler]:
    """A :class:`RecordingHandler` subclass with a ``seen`` list of its own."""
    return type("Recorder", (RecordingHandler,), {"seen": []})
