"""Generators: the LLM generator over real HTTP (prompt, context_k, caching, recorded failures)
and the extractive generator (sentence choice, refusal, determinism)."""

from __future__ import annotations

import numpy as np
import pytest

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.judging.correctness import is_refusal
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.generators import REFUSAL_ANSWER, Generator
from reference_pipelines.generators.extractive import (
    ExtractiveGenerator,
    split_sentences,
)
from reference_pipelines.generators.llm import GROUNDED_QA_TEMPLATE, LLMGenerator
from tests.helpers.fake_openai_server import FakeOpenAIServer, ok, status

pytestmark = pytest.mark.timeout(60)

CHUNKS = [
    Chunk("webhooks#chunk_0", "webhooks", 0, 0, 0, "Failed deliveries are retried with exponential backoff for 24 hours. "
          "After that the event is marked failed.", "Webhooks"),
    Chunk("webhooks#chunk_1", "webhooks", 1, 0, 0, "Each delivery attempt times out after 10 seconds. "
          "Respond with a 2xx status quickly and process the event later.", "Webhooks"),
    Chunk("keys#chunk_0", "keys", 0, 0, 0, "You can have two active keys at once. Create the new key, deploy it, "
          "then revoke the old key: there is no downtime.", "API keys"),
    Chunk("limits#chunk_0", "limits", 0, 0, 0, "The search endpoint allows 30 requests per minute per key.", "Rate limits"),
]


@pytest.fixture()
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def http_model(server: FakeOpenAIServer) -> dict:
    return {"backend": "openai", "base_url": server.base_url, "model": "fake-model", "api_key_env": "RAGEXP_TEST_NO_KEY",
            "timeout_s": 2.0, "max_retries": 1, "backoff_base_s": 0.01, "backoff_max_s": 0.02}


def test_llm_generator_prompt_shows_only_context_k_chunks(server):
    server.script(ok("  Retried for 24 hours.  "))
    generator = LLMGenerator(http_model(server), context_k=2, max_new_tokens=40)
    assert isinstance(generator, Generator)
    generation = generator.generate("How long are webhooks retried?", CHUNKS)
    assert generation.answer == "Retried for 24 hours."
    assert generation.error is None and generation.model_id == "fake-model"
    assert generation.context_ids == ("webhooks#chunk_0", "webhooks#chunk_1")
    sent = server.requests[0]["body"]
    assert sent["max_tokens"] == 40 and sent["temperature"] == 0.0
    assert sent["messages"] == [{"role": "user", "content": generation.prompt}]
    assert "[1] Webhooks\nFailed deliveries" in generation.prompt and "[2] Webhooks\nEach delivery" in generation.prompt
    assert "two active keys" not in generation.prompt
    assert REFUSAL_ANSWER in generation.prompt and generation.prompt.endswith("Question: How long are webhooks retried?\nAnswer:")


def test_llm_generator_records_failure_instead_of_raising(server):
    server.script(status(500), status(500))
    generation = LLMGenerator(http_model(server)).generate("q", CHUNKS)
    assert generation.failed and generation.answer == ""
    assert generation.error.startswith("http_5xx:")
    assert not generation.refused
    assert server.hits == 2


def test_llm_generator_second_run_makes_zero_calls(server, tmp_path):
    queries = ["How long are webhooks retried?", "What is the search rate limit?"]

    def sweep(prompt_version: str) -> list[str]:
        generator = LLMGenerator(http_model(server), prompt_version=prompt_version, cache=StageCache(tmp_path))
        return [generator.generate(q, CHUNKS).answer for q in queries]

    first = sweep("v1")
    assert server.hits == 2
    assert sweep("v1") == first and server.hits == 2
    sweep("v2")
    assert server.hits == 4


def test_braces_in_context_and_query_are_kept_verbatim(server):
    chunk = Chunk("json#chunk_0", "json", 0, 0, 0, 'Send {"query": "{context}"} as the body.')
    generation = LLMGenerator(http_model(server)).generate("What is {query}?", [chunk])
    assert 'Send {"query": "{context}"} as the body.' in generation.prompt
    assert "Question: What is {query}?" in generation.prompt


def test_template_must_name_context_and_query(server):
    with pytest.raises(RagexpInputError, match="prompt_template"):
        LLMGenerator(http_model(server), prompt_template="Answer: {query}")
    custom = LLMGenerator(http_model(server), prompt_template="Q: {query}\nDocs:\n{context}\nA:")
    assert custom.params["prompt_template_sha256"] != LLMGenerator(http_model(server)).params["prompt_template_sha256"]
    assert "{context}" in GROUNDED_QA_TEMPLATE


def test_api_key_in_config_is_refused(server):
    with pytest.raises(RagexpInputError, match="api_key_env"):
        LLMGenerator({**http_model(server), "api_key": "sk-secret"})


def test_extractive_answers_with_the_best_sentences_best_first():
    generator = ExtractiveGenerator(top_sentences=2, context_k=4)
    generation = generator.generate("When does a delivery attempt time out?", CHUNKS)
    assert generation.answer == (
        "Each delivery attempt times out after 10 seconds. "
        "Failed deliveries are retried with exponential backoff for 24 hours."
    )
    assert generation.error is None and generation.completion_tokens == 0 and generation.model_id == "extractive-bm25"


def test_extractive_answer_is_deterministic_and_limited():
    generator = ExtractiveGenerator(top_sentences=1, context_k=4)
    answers = {generator.generate("search endpoint requests per minute", CHUNKS).answer for _ in range(3)}
    assert answers == {"The search endpoint allows 30 requests per minute per key."}


def test_extractive_refuses_without_enough_overlap():
    generator = ExtractiveGenerator(context_k=4)
    generation = generator.generate("Which currencies are supported for invoices?", CHUNKS)
    assert generation.answer == REFUSAL_ANSWER and generation.refused
    assert ExtractiveGenerator().generate("anything", []).refused


def test_extractive_only_sees_context_k_chunks():
    generation = ExtractiveGenerator(context_k=1).generate("search endpoint requests per minute", CHUNKS)
    assert generation.refused and generation.context_ids == ("webhooks#chunk_0",)


class BagOfWordsEncoder:
    """A deterministic stand-in encoder: hashed word counts."""

    identity = {"model": "bag-of-words-test"}

    def _vectors(self, texts):
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                rows[row, sum(map(ord, word)) % 64] += 1.0
        return rows

    encode_queries = _vectors
    encode_passages = _vectors


def test_extractive_with_encoder_ranks_by_cosine():
    generator = ExtractiveGenerator(top_sentences=1, context_k=4, encoder=BagOfWordsEncoder(), min_similarity=0.3)
    generation = generator.generate("Each delivery attempt times out after how many seconds?", CHUNKS)
    assert generation.answer == "Each delivery attempt times out after 10 seconds."
    assert generator.params["encoder"] == {"model": "bag-of-words-test"}
    assert generator.generate("zebra", CHUNKS).refused


def test_split_sentences_and_refusal_matching():
    assert split_sentences("One. Two!\nThree? four") == ["One.", "Two!", "Three?", "four"]
    assert is_refusal("  \"I don't know based on the provided documents.\" ")
    assert is_refusal("I don\u2019t know based on the provided documents")
    assert not is_refusal("I know: 24 hours.")


def test_eval_context_k_is_the_one_home_of_how_many_chunks_reach_the_generator(tmp_path):
    from hydra import compose, initialize_config_dir

    from ragexp.config.compose import CONFIG_DIR
    from ragexp.config.schema import register_schema
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.evaluation.pipeline import build_pipeline
    from ragexp.runtime.stage_cache import StageCache

    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        def context_k(*overrides):
            return compose("config", overrides=list(overrides)).eval.context_k

        # no generator group sets it: a sweep generator=none,local,... measures context_* at one depth
        assert {context_k(f"generator={g.stem}") for g in (CONFIG_DIR / "generator").glob("*.yaml")} == {context_k()} == {5}
        assert not [g.name for g in (CONFIG_DIR / "generator").glob("*.yaml") if "_global_" in g.read_text()]
        assert context_k("generator=extractive", "eval.context_k=4") == 4  # the command line sets it
        cfg = compose("config", overrides=["generator=extractive", "+generator.context_k=2", f"cache_dir={tmp_path}"])
    with pytest.raises(RagexpInputError) as caught:
        build_pipeline(job_spec(cfg), StageCache(tmp_path))
    assert caught.value.field == "generator.context_k" and "eval.context_k=2" in caught.value.message
