"""An endpoint that refuses every call of a batch with one 4xx (a wrong model name, path or key)
stops the generator with one line quoting it; any answered call, another status, a 429 or a
5xx keeps the per-question failure accounting (the real server: tests/test_real_server.py)."""

from __future__ import annotations

import pytest

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.llm.base import LLMCallError, LLMResponse, refused_by_endpoint
from ragexp.llm.openai_compat import OpenAIChatModel
from reference_pipelines.generators.llm import LLMGenerator
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok, status

ANSWER = LLMResponse("yes", 1, 1, False, "m", 0.0)


def refusal(code: int) -> LLMCallError:
    return LLMCallError("http_4xx", f"answered HTTP {code}", status=code)


def test_only_one_4xx_status_on_every_call_is_a_refusal() -> None:
    assert refused_by_endpoint([refusal(404), refusal(404)]).status == 404
    assert refused_by_endpoint([refusal(404), ANSWER]) is None
    assert refused_by_endpoint([refusal(404), refusal(400)]) is None
    assert refused_by_endpoint([refusal(429)]) is None
    assert refused_by_endpoint([LLMCallError("http_5xx", "down", status=503)]) is None
    assert refused_by_endpoint([]) is None


def test_a_refused_batch_stops_the_generator_with_the_servers_words() -> None:
    chunk = Chunk("c#0", "c", 0, 0, 10, "Some text.")
    with FakeOpenAIServer() as server:
        server.script(*[status(400)] * 3)
        generator = LLMGenerator(OpenAIChatModel(server.base_url, "smool", max_retries=0), max_new_tokens=8)
        with pytest.raises(RagexpInputError, match="refused all 3 calls: http_4xx") as err:
            generator.generate_batch([("q1", [chunk]), ("q2", [chunk]), ("q3", [chunk])])
        assert err.value.field == "generator.model" and "HTTP 400" in str(err.value) and "\n" not in str(err.value)
        assert server.hits == 3
        server.script(status(400), ok("An answer."))
        first, second = generator.generate_batch([("q1", [chunk]), ("q2", [chunk])])
        assert first.error.startswith("http_4xx") and second.answer == "An answer."
