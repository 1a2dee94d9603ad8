"""``device`` in every config group whose model takes one: ``auto`` by default, ``cuda`` refused in
one line on a machine without CUDA before any work, ONNX on a GPU through ONNX Runtime's CUDA
provider or else torch (said once), and the resolved devices recorded as a run tag.

This machine has no GPU: where a GPU is needed, CUDA availability (and ONNX Runtime's CUDA
provider) is monkeypatched; no model is run on a GPU here (docs/generation.md, "GPU", says what
was measured on one)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragexp.config.compose import compose_config
from ragexp.errors import RagexpInputError
from ragexp.evaluation.checks import PIPELINE_GROUPS, check_job
from ragexp.models import device as device_module
from ragexp.models import encoders
from ragexp.models.device import devices_tag, resolve_device, resolved_devices
from ragexp.runtime.text_vectors import BACKEND_NOTES
from reference_pipelines.encoders import Embedding, OnnxEncoder, SentenceTransformerEncoder
from tests.helpers.cli import ENV

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def one_gpu(monkeypatch):
    """Torch sees one CUDA device; ONNX Runtime has no CUDA provider (the CPU package)."""
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(encoders, "onnx_cuda_available", lambda: False)


def test_auto_is_the_cpu_here_and_cuda_is_refused_with_the_reason() -> None:
    assert device_module.cuda_device_count() == 0  # this machine (CI too) has no GPU
    assert resolve_device("auto") == resolve_device("cpu") == "cpu"
    with pytest.raises(RagexpInputError, match="torch sees no CUDA device on this machine") as err:
        resolve_device("cuda", field="embedding.device")
    assert err.value.field == "embedding.device" and "\n" not in str(err.value)
    for bad in ("gpu", "cuda:x", "cpu:0", "", 0):
        with pytest.raises(RagexpInputError, match="auto, cpu, cuda or cuda:N"):
            resolve_device(bad)


def test_auto_is_cuda_where_torch_sees_a_gpu(one_gpu) -> None:
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(RagexpInputError, match=r"1 CUDA device\(s\)"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("group", ["embedding=minilm", "embedding=paraphrase_minilm_l3", "reranker=cross_encoder",
                                   "reranker=embedding", "generator=local", "judge=local"])
def test_every_group_whose_model_takes_a_device_lists_it_as_auto(group) -> None:
    cfg = compose_config([group, "reranker.model=some-folder"] if group == "reranker=cross_encoder" else [group])
    config = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in PIPELINE_GROUPS if cfg.get(g) is not None}
    found = resolved_devices(config)
    name = group.split("=")[0]
    assert any(path.startswith(name) and path.endswith("device") for path in found), found
    assert set(found.values()) == {"cpu"}


def test_a_cuda_override_without_plus_fails_the_job_check_in_one_line() -> None:
    overrides = ["embedding.device=cuda", "generator=local", "generator.model.device=cpu", "cache_dir=unused"]
    cfg = compose_config(overrides)  # the key exists: no "+" needed
    with pytest.raises(RagexpInputError, match="no CUDA device") as err:
        check_job(cfg, overrides)
    assert err.value.field == "embedding.device"


def test_the_cli_refuses_cuda_before_any_work(tmp_path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "run", "embedding.device=cuda", "retrieval=dense",
                           f"cache_dir={tmp_path / 'cache'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "cuda" in line]
    assert len(lines) == 1 and "embedding.device" in lines[0] and "no CUDA device" in lines[0], proc.stderr[-2000:]
    assert not (tmp_path / "cache").exists()  # nothing chunked, embedded or cached


def test_onnx_on_a_gpu_without_the_cuda_provider_runs_torch_on_the_gpu_and_says_so_once(one_gpu, caplog) -> None:
    for model in ("minilm", "paraphrase-minilm-l3"):
        BACKEND_NOTES.pop(model, None)
    with caplog.at_level(logging.WARNING, logger="ragexp.models.encoders"):
        built = [Embedding(model="minilm", backend="onnx") for _ in range(2)]  # a sentence-transformers folder
        packaged_onnx = [Embedding(model="paraphrase-minilm-l3", backend="onnx") for _ in range(2)]  # an .onnx model
    for embedding in built:
        assert isinstance(embedding.encoder, SentenceTransformerEncoder)
        assert embedding.device == embedding.encoder.device == "cuda" and embedding.backend == "torch"
    for embedding in packaged_onnx:  # no torch weights: ONNX on the CPU
        assert isinstance(embedding.encoder, OnnxEncoder) and embedding.encoder.device == "cpu"
    said = [r.getMessage() for r in caplog.records if "minilm" in r.getMessage()]
    assert len(said) == 2, said
    assert "no CUDA provider" in said[0] and "torch runs it on cuda" in said[0]
    assert "runs on cpu" in said[1] and "no torch weights" in said[1]
    assert encoders.effective_backend("minilm", "onnx", device="cuda") == "torch"
    for model in ("minilm", "paraphrase-minilm-l3"):
        BACKEND_NOTES.pop(model, None)


def test_onnx_on_a_gpu_with_the_cuda_provider_asks_for_it(monkeypatch) -> None:
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(encoders, "onnx_cuda_available", lambda: True)
    embedding = Embedding(model="minilm", backend="onnx", device="auto")
    assert isinstance(embedding.encoder, OnnxEncoder) and embedding.encoder.device == "cuda"
    asked = {}

    class Session:
        def __init__(self, path, options, providers):
            asked["providers"] = providers

    import onnxruntime

    monkeypatch.setattr(onnxruntime, "InferenceSession", Session)
    encoders._load_onnx_session.cache_clear()
    encoders._load_onnx_session(str(embedding.encoder.graph), 1, "cuda")
    encoders._load_onnx_session.cache_clear()
    assert asked["providers"] == [("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]


def test_a_local_model_checks_its_device_before_loading_weights(one_gpu) -> None:
    from ragexp.llm.local_hf import LocalHFModel

    with pytest.raises(RagexpInputError, match="quantizes float32 weights on the CPU"):
        LocalHFModel(device="cuda", quantization="dynamic_int8")
    with pytest.raises(RagexpInputError, match=r"1 CUDA device\(s\)"):
        LocalHFModel(device="cuda:1")


def test_the_run_tag_names_each_models_resolved_device(one_gpu) -> None:
    cfg = compose_config(["generator=local", "judge=local", "generator.model.device=cpu"])
    config = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in PIPELINE_GROUPS if cfg.get(g) is not None}
    assert devices_tag(config, PIPELINE_GROUPS) == (
        "embedding.device=cuda generator.model.device=cpu judge.scoring_model.device=cuda "
        "retrieval.encoder.device=cuda")  # the default hybrid retriever's dense half is ${embedding}
