"""The HTTP client of ``system=http`` against a real server on 127.0.0.1: the secret from this
machine's environment (sent, never shown), retries with backoff, the rate limit, the allow-list."""

from __future__ import annotations

import time

import pytest

from ragexp.config.endpoints import check_endpoints
from ragexp.errors import RagexpInputError
from ragexp.systems.http_system import HttpSystem
from ragexp.systems.response import ResponseFields, SystemCallError
from tests.helpers.system_server import Raw, serve

SECRET = "sk-ragexp-TEST-0a1b2c3d4e5f60718293"
OK = {"passages": [{"text": "Failed deliveries are retried for 24 hours.", "doc_id": "webhooks"}]}


def test_the_secret_comes_from_the_environment_and_is_never_shown(monkeypatch):
    monkeypatch.setenv("TEAM_RAG_TOKEN", SECRET)
    with serve(lambda body, headers: Raw(f'{{"detail": "bad token {headers["authorization"]}"}}'.encode(), 401)) as server:
        system = HttpSystem(server.url, ResponseFields(), secret_env="TEAM_RAG_TOKEN", max_retries=0)
        with pytest.raises(SystemCallError) as refused:
            system.call({"query": "q"})
        assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert refused.value.kind == "http_4xx" and SECRET not in refused.value.message and "<redacted>" in refused.value.message
    assert SECRET not in repr(system) and SECRET not in str(system.identity())
    monkeypatch.delenv("TEAM_RAG_TOKEN")
    with pytest.raises(RagexpInputError, match=r"names \$TEAM_RAG_TOKEN, which is not set on this machine") as unset:
        HttpSystem("http://127.0.0.1:9/search", ResponseFields(), secret_env="TEAM_RAG_TOKEN")
    assert unset.value.field == "system.secret_env"


def test_5xx_and_429_are_retried_with_backoff_and_4xx_is_not():
    replies = [Raw(b"busy", 503), Raw(b"slow down", 429), OK, Raw(b"nope", 404)]
    with serve(lambda body: replies.pop(0)) as server:
        system = HttpSystem(server.url, ResponseFields(), max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)
        payload, latency_ms, attempts = system.call({"query": "q"})
        assert payload == OK and attempts == 3 and latency_ms > 0 and server.hits == 3
        with pytest.raises(SystemCallError, match="answered HTTP 404: nope after 1 attempt") as failed:
            system.call({"query": "q"})
        assert failed.value.kind == "http_4xx" and server.hits == 4


def test_the_rate_limit_spaces_request_starts_over_all_workers():
    with serve(lambda body: OK) as server:
        system = HttpSystem(server.url, ResponseFields(), rate_limit_per_s=20)
        started = time.monotonic()
        for _ in range(6):
            system.call({"query": "q"})
        assert time.monotonic() - started >= 5 / 20 - 0.01  # six starts, 50 ms apart at least


def test_a_system_url_in_a_config_from_elsewhere_must_be_allowed_here(monkeypatch):
    monkeypatch.delenv("RAGEXP_ALLOWED_ENDPOINTS", raising=False)
    config = {"system": {"name": "http", "url": "http://10.0.0.5:8080/search", "secret_env": "TEAM_RAG_TOKEN"}}
    with pytest.raises(RagexpInputError, match=r"sends the key in \$TEAM_RAG_TOKEN to http://10.0.0.5:8080/search") as refused:
        check_endpoints(config)
    assert refused.value.field == "system.url"
    check_endpoints(config, ["http://10.0.0.5:8080/search=TEAM_RAG_TOKEN"])  # allowed with its variable
    with pytest.raises(RagexpInputError):
        check_endpoints(config, ["http://10.0.0.5:8080/search"])  # a bare URL allows no key
    with pytest.raises(RagexpInputError, match="must be the http"):
        HttpSystem("file:///etc/passwd", ResponseFields())
