"""OpenAIChatModel over real HTTP against the scripted fake server: retries, timeouts,
malformed bodies, the call cache and API-key handling."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from ragexp.llm.base import ChatModel, LLMCallError
from ragexp.llm.call_cache import CallCache
from ragexp.llm.openai_compat import OpenAIChatModel
from ragexp.llm.retry import BackoffPolicy, parse_retry_after
from tests.helpers.fake_openai_server import (
    FakeOpenAIServer,
    dropped,
    malformed,
    ok,
    slow,
    status,
    too_many_requests,
)

pytestmark = pytest.mark.timeout(60)

KEY_ENV = "RAGEXP_TEST_LLM_KEY"
SECRET = "sk-test-0123456789-do-not-leak"


@pytest.fixture()
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def make_model(server: FakeOpenAIServer, **overrides) -> OpenAIChatModel:
    settings = dict(base_url=server.base_url, model="fake-model", api_key_env=KEY_ENV, timeout_s=2.0,
                    max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)
    settings.update(overrides)
    return OpenAIChatModel(**settings)


def test_success_returns_text_tokens_and_sends_chat_body(server):
    server.script(ok("Paris is the capital."))
    model = make_model(server)
    assert isinstance(model, ChatModel)
    response = model.complete("Capital of France?", max_tokens=12, stop=["\n"])
    assert response.text == "Paris is the capital."
    assert response.completion_tokens == 4 and response.prompt_tokens > 0
    assert not response.cached and response.model == "fake-model"
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {"model": "fake-model", "messages": [{"role": "user", "content": "Capital of France?"}],
                               "max_tokens": 12, "temperature": 0.0, "stop": ["\n"]}
    assert model.stats.calls == 1 and model.stats.completion_tokens == 4


def test_retries_429_and_500_then_succeeds(server):
    server.script(too_many_requests("0"), status(500), status(503), ok("finally"))
    model = make_model(server)
    assert model.complete("q").text == "finally"
    assert server.hits == 4
    assert model.stats.retries == 3 and model.stats.calls == 1 and not model.stats.failures


def test_retry_after_seconds_is_honoured(server):
    server.script(too_many_requests("1"), ok("after waiting"))
    model = make_model(server, backoff_max_s=5.0)
    started = time.perf_counter()
    assert model.complete("q").text == "after waiting"
    assert time.perf_counter() - started >= 0.95


def test_retry_after_is_capped_by_backoff_max(server):
    server.script(too_many_requests("3600"), ok("not an hour later"))
    model = make_model(server, backoff_max_s=0.2)
    started = time.perf_counter()
    assert model.complete("q").text == "not an hour later"
    assert time.perf_counter() - started < 5


def test_5xx_exhausts_bounded_retries(server):
    server.script(*[status(502)] * 10)
    model = make_model(server, max_retries=2)
    with pytest.raises(LLMCallError) as caught:
        model.complete("q")
    assert caught.value.kind == "http_5xx" and caught.value.attempts == 3 and caught.value.status == 502
    assert server.hits == 3
    assert model.stats.failures == {"http_5xx": 1} and model.stats.calls == 0


def test_other_4xx_is_not_retried(server):
    server.script(status(401), ok("never reached"))
    model = make_model(server)
    with pytest.raises(LLMCallError) as caught:
        model.complete("q")
    assert caught.value.kind == "http_4xx" and caught.value.status == 401 and caught.value.attempts == 1
    assert server.hits == 1


def test_timeout_fails_after_bounded_retries_without_hanging(server):
    server.script(*[slow(30.0)] * 5)
    model = make_model(server, timeout_s=0.3, max_retries=1)
    started = time.perf_counter()
    with pytest.raises(LLMCallError) as caught:
        model.complete("q")
    elapsed = time.perf_counter() - started
    assert caught.value.kind == "timeout" and caught.value.attempts == 2
    assert server.hits == 2
    assert elapsed < 3.0
    assert model.stats.failures == {"timeout": 1}


def test_slow_reply_then_fast_reply_recovers(server):
    server.script(slow(30.0), ok("fast"))
    model = make_model(server, timeout_s=0.3)
    assert model.complete("q").text == "fast"
    assert model.stats.retries == 1


def test_dropped_connection_is_retried_then_counted(server):
    server.script(dropped(), ok("reconnected"))
    model = make_model(server)
    assert model.complete("q").text == "reconnected"
    server.script(*[dropped()] * 5)
    with pytest.raises(LLMCallError) as caught:
        make_model(server, max_retries=1).complete("q2")
    assert caught.value.kind == "connection" and caught.value.attempts == 2


def test_unreachable_endpoint_is_a_connection_error():
    with FakeOpenAIServer() as fake:
        base_url = fake.base_url
    model = OpenAIChatModel(base_url, "m", timeout_s=1.0, max_retries=1, backoff_base_s=0.01)
    with pytest.raises(LLMCallError) as caught:
        model.complete("q")
    assert caught.value.kind == "connection"


def test_malformed_body_is_a_counted_failure_not_a_default(server):
    server.script(malformed(), ok("would be fine"))
    model = make_model(server)
    with pytest.raises(LLMCallError) as caught:
        model.complete("q")
    assert caught.value.kind == "malformed" and caught.value.attempts == 1
    assert model.stats.failures == {"malformed": 1}
    assert model.complete("q").text == "would be fine"


def test_second_identical_run_makes_zero_calls(server, tmp_path):
    prompts = ["What is BM25?", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]]

    def run() -> list[str]:
        model = make_model(server, cache=CallCache(tmp_path / "calls", template="qa@v1"))
        return [model.complete(p, max_tokens=20).text for p in prompts]

    first = run()
    assert server.hits == 2
    second = run()
    assert second == first and server.hits == 2

    cached = make_model(server, cache=CallCache(tmp_path / "calls", template="qa@v1")).complete(prompts[0], max_tokens=20)
    assert cached.cached and server.hits == 2
    make_model(server, cache=CallCache(tmp_path / "calls", template="qa@v1")).complete(prompts[0], max_tokens=21)
    make_model(server, cache=CallCache(tmp_path / "calls", template="qa@v2")).complete(prompts[0], max_tokens=20)
    make_model(server, model="other", cache=CallCache(tmp_path / "calls", template="qa@v1")).complete(prompts[0], max_tokens=20)
    assert server.hits == 5


def test_failed_calls_are_not_cached(server, tmp_path):
    cache = CallCache(tmp_path / "calls")
    server.script(status(400))
    with pytest.raises(LLMCallError):
        make_model(server, cache=cache).complete("q")
    assert make_model(server, cache=cache).complete("q").text == "echo: q"
    assert server.hits == 2


def test_corrupted_cache_entry_is_a_miss(server, tmp_path):
    cache = CallCache(tmp_path / "calls")
    make_model(server, cache=cache).complete("q")
    (entry,) = (tmp_path / "calls").glob("*/*.json")
    entry.write_text('{"key": ', encoding="utf-8")
    assert make_model(server, cache=cache).complete("q").text == "echo: q"
    assert server.hits == 2 and cache.misses == 2


def test_api_key_comes_from_env_and_never_shows(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    model = make_model(server)
    model.complete("q")
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(model) and "<redacted>" in repr(model)
    assert SECRET not in str(model.params()) and SECRET not in str(vars(model.stats))

    server.script(status(403))
    with pytest.raises(LLMCallError) as caught:
        model.complete("q2")
    assert SECRET not in str(caught.value)


def test_without_key_env_no_authorization_header(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    model = make_model(server)
    model.complete("q")
    assert "Authorization" not in server.requests[-1]["headers"]
    assert "<unset>" in repr(model)


def test_parse_retry_after_seconds_and_http_date():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_backoff_is_full_jitter_within_the_exponential_ceiling():
    policy = BackoffPolicy(max_retries=5, backoff_base_s=0.5, backoff_max_s=3.0)
    for retry_index, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (6, 3.0)]:
        delays = [policy.delay(retry_index) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2
    assert policy.delay(0, retry_after_s=10.0) == 3.0
