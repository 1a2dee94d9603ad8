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


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("location", ["http://127.0.0.1:9/elsewhere", "https://other.example/search?q=1", "/v2/search", None,
                                      "http://127.0.0.1:9/\x1b[31mred"])
def test_a_redirect_is_named_as_a_redirect_and_never_followed(status, location):
    headers = (("Location", location),) if location is not None else ()
    with serve(lambda body: Raw(b"", status, headers=headers)) as server:
        system = HttpSystem(server.url, ResponseFields(), max_retries=3, backoff_base_s=0.01)
        with pytest.raises(SystemCallError) as failed:
            system.call({"query": "q"})
        assert server.hits == 1  # not retried, not followed
    message = failed.value.message
    assert failed.value.kind == "redirect" and "\x1b" not in message
    assert message.endswith("which is never followed: set system.url to the endpoint itself after 1 attempt(s)")
    if location is None:
        assert f"answered HTTP {status}, a redirect to (no Location)" in message
    elif location.isprintable():
        assert f"answered HTTP {status}, a redirect to {location}, which" in message
    else:
        assert "a redirect to an invalid Location" in message


@pytest.mark.parametrize("drip_s, timeout_s", [(0.2, 1.0), (0.05, 0.5)])
def test_timeout_s_bounds_a_slow_drip_body_whole(drip_s, timeout_s):
    """Each byte comes well within the timeout, the whole body (60 bytes) would take 3-12 s."""
    body = b'{"passages": [{"text": "x", "doc_id": "webhooks"}]}        '
    with serve(lambda _: Raw(body, drip_s=drip_s)) as server:
        system = HttpSystem(server.url, ResponseFields(), timeout_s=timeout_s, max_retries=0)
        started = time.monotonic()
        with pytest.raises(SystemCallError) as failed:
            system.call({"query": "q"})
        took = time.monotonic() - started
    assert failed.value.kind == "timeout" and "system.timeout_s bounds the whole request" in failed.value.message
    assert took < timeout_s + drip_s + 0.5, took


def test_query_timeout_s_bounds_a_querys_attempts_together():
    with serve(lambda _: Raw(b"{}", delay_s=5)) as server:
        system = HttpSystem(server.url, ResponseFields(), timeout_s=0.4, query_timeout_s=1.0, max_retries=10,
                            backoff_base_s=0.01, backoff_max_s=0.02)
        started = time.monotonic()
        with pytest.raises(SystemCallError, match=r"system.query_timeout_s=1 spent") as failed:
            system.call({"query": "q"})
        took = time.monotonic() - started
    assert failed.value.kind == "timeout" and 2 <= failed.value.attempts <= 4 and took < 1.6, (failed.value.attempts, took)


def _items(n: int):
    from ragexp.datamodel import EvalItem

    return [EvalItem(id=f"q{i}", query=f"question {i}") for i in range(n)]


def test_the_overall_deadline_stops_a_hung_endpoint_and_keeps_what_was_answered(tmp_path):
    """A real slow server: the first three queries answer at once, the rest hang past every timeout."""
    from ragexp.runtime.stage_cache import StageCache
    from ragexp.systems.fetch import fetch_all

    def answer(body):
        return OK if body["query"] in ("question 0", "question 1", "question 2") else Raw(b"{}", delay_s=30)

    cache = StageCache(tmp_path / "cache")
    with serve(answer) as server:
        system = HttpSystem(server.url, ResponseFields(), concurrency=1, timeout_s=20, query_timeout_s=20)
        started = time.monotonic()
        with pytest.raises(RagexpInputError) as stopped:
            fetch_all(system, _items(8), cache, deadline_s=1.5)
        took = time.monotonic() - started
        assert took < 1.5 + 20 + 2  # the deadline, then at most one attempt in flight ends
        message = stopped.value.message
        assert "system.deadline_s=1.5 passed with 5 of 8 queries unanswered" in message
        assert "the 3 answered are cached, run the same command again to resume" in message
        hits = server.hits
        with pytest.raises(RagexpInputError):
            fetch_all(HttpSystem(server.url, ResponseFields(), concurrency=1, timeout_s=0.2, max_retries=0), _items(8),
                      cache, deadline_s=0.5)
        assert server.bodies[hits]["query"] == "question 3"  # the answered three were not asked again


def test_questions_that_keep_failing_stop_the_run_at_the_cap_with_their_list(tmp_path):
    from ragexp.runtime.stage_cache import StageCache
    from ragexp.systems.fetch import fetch_all

    failing = {"question 1", "question 4", "question 5"}
    with serve(lambda body: Raw(b"down", 503) if body["query"] in failing else OK) as server:
        system = HttpSystem(server.url, ResponseFields(), concurrency=1, max_retries=0)
        with pytest.raises(RagexpInputError) as stopped:
            fetch_all(system, _items(20), StageCache(tmp_path / "cache"), max_failed_queries=3)
        asked = server.hits
        assert asked in (6, 7)  # q0..q5 (and q6, queued behind the worker): stopped at the third failure
    message = stopped.value.message
    answered = asked - 3 if f"the {asked - 3} answered" in message else 3  # q6 answered before the stop, or not
    assert (f"stopped after 3 failed queries (system.max_failed_queries=3), {17 - answered} left unanswered; "
            "failed: q1, q4, q5") in message
    assert "http_5xx x3" in message and f"the {answered} answered are cached" in message
