"""API keys come only from the environment and are written nowhere.

``ragexp run`` talks to the scripted OpenAI-compatible server (:mod:`fake_openai_server`) on
127.0.0.1 with a distinctive ``OPENAI_API_KEY``. Every byte the run wrote is then searched: the
sqlite MLflow store, the artifact folder, Hydra's output folder, the stage cache, the process's
temporary files (``TMPDIR`` points into the test folder) and the captured stdout/stderr. The key
must appear nowhere, while the server must have received it (so the key was really in use).
A key in a config is refused with exit 2 naming the field.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from ragexp.tracking.metric_names import results_view
from tests.helpers.fake_openai_server import FakeOpenAIServer, _Handler, ok, status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

GENERATOR_MODEL = "gpt-4o-mini"  # conf/generator/openai.yaml
JUDGE_MODEL = "gpt-4o"  # conf/judge/openai.yaml
# Every call gets this reply: an answer with claims to the generator (an echo of the prompt would
# quote its refusal sentence and leave nothing to judge), a "yes" verdict and a question to the judge.
REPLY = "Yes. Failed deliveries are retried for 24 hours."


def new_secret() -> str:
    return f"sk-ragexp-SECRET-{secrets.token_hex(16)}"


class _KeyEchoingHandler(_Handler):
    """Error replies quote the Authorization header back, as some endpoints and proxies do
    ("Incorrect API key provided: ..."): the worst case for an error message that keeps the body."""

    def _send(self, code: int, payload: bytes, headers: dict[str, str]) -> None:
        if code >= 400:
            message = f"Incorrect API key provided: {self.headers.get('Authorization', '')}"
            payload = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        super()._send(code, payload, headers)


def run_ragexp(tmp_path: Path, tiny_dataset, server: FakeOpenAIServer | None, key: str, *overrides: str):
    """``ragexp run`` in a subprocess whose every output (store, artifacts, Hydra dir, cache, temp
    files) lands under ``tmp_path``; returns the completed process."""
    corpus, evalset = tiny_dataset
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MLFLOW_"))}
    env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OPENAI_API_KEY": key, "TMPDIR": str(tmpdir)})
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    args = ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "tracking.experiment=secrets", "progress=false",
            "retrieval=bm25", "chunking=markdown", f"cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'out'}",
            *overrides]
    return subprocess.run([sys.executable, "-m", "ragexp.cli", "run", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=200)


def files_containing(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose raw bytes contain ``needle``."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def assert_outputs_exist(tmp_path: Path, calls_cached: bool = True) -> None:
    """The places searched are the real outputs: guards against a scan of an empty folder."""
    assert (tmp_path / "mlflow.db").stat().st_size > 0
    assert list((tmp_path / "mlruns").rglob("ragexp_results.json")), "no artifact folder under mlruns/"
    assert list((tmp_path / "mlruns").rglob(store.PER_QUERY_TABLE))
    assert (tmp_path / "out" / ".hydra" / "config.yaml").exists() and (tmp_path / "out" / "ragexp_results.json").exists()
    assert list((tmp_path / "cache" / "chunks").rglob("*"))
    if calls_cached:
        assert list((tmp_path / "cache" / "llm_calls").rglob("*.json")), "the model calls were not cached"
    # The store keeps text in the clear: the generator's settings are findable by the same byte search.
    assert GENERATOR_MODEL.encode() in (tmp_path / "mlflow.db").read_bytes()


def only_run(tmp_path: Path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("secrets").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    return runs[0]


def test_key_from_env_reaches_the_endpoint_and_is_written_nowhere(tiny_dataset, tmp_path):
    key = new_secret()
    with FakeOpenAIServer() as server:
        server.script(*[ok(REPLY)] * 500)
        proc = run_ragexp(tmp_path, tiny_dataset, server, key, "generator=openai", "judge=openai")
    assert proc.returncode == 0, proc.stderr[-3000:]
    models = {r["body"]["model"] for r in server.requests}
    assert models == {GENERATOR_MODEL, JUDGE_MODEL}, models  # generator and judge both called the endpoint
    assert all(r["headers"].get("Authorization") == f"Bearer {key}" for r in server.requests)
    run = only_run(tmp_path)
    assert run.data.params["generator.model.api_key_env"] == "OPENAI_API_KEY"  # the variable's name is logged
    aggregates = results_view(run.data.metrics, run.data.params)
    assert aggregates["generation_errors"] == 0.0 and aggregates["faithfulness"] == 1.0
    assert_outputs_exist(tmp_path)
    assert key not in proc.stdout and key not in proc.stderr
    assert files_containing(tmp_path, key) == []
    assert files_containing(tmp_path, key[len("sk-ragexp-"):]) == []  # not even without its prefix


def test_key_echoed_by_a_failing_endpoint_is_redacted_everywhere(tiny_dataset, tmp_path):
    """The first question gets HTTP 500 twice (retry exhausted), every later one a 401 whose body
    quotes the key; the errors are recorded per query, redacted, and the run still finishes."""
    key = new_secret()
    with FakeOpenAIServer() as server:
        server._httpd.RequestHandlerClass = _KeyEchoingHandler
        server.script(status(500), status(500), *[status(401)] * 20)
        proc = run_ragexp(tmp_path, tiny_dataset, server, key, "generator=openai", "generator.model.max_retries=1",
                          "+generator.model.backoff_base_s=0.01")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert server.requests and all(r["headers"].get("Authorization") == f"Bearer {key}" for r in server.requests)
    assert server.hits == 2 + 6  # 500 + one retry, then one 401 for each of the 6 other questions (4xx is not retried)
    assert "401 Unauthorized" in proc.stdout + proc.stderr and "500 Internal Server Error" in proc.stdout + proc.stderr
    run = only_run(tmp_path)
    aggregates = results_view(run.data.metrics, run.data.params)
    assert aggregates["generation_errors"] == 7.0
    results = json.loads((tmp_path / "out" / "ragexp_results.json").read_text(encoding="utf-8"))
    errors = [row["generation_error"] for row in results["per_query"] if "generation_error" in row]
    assert len(errors) == 7
    # a failed call is a generation_error, never a generation failure or a (correct) empty refusal
    assert {row["failure_class"] for row in results["per_query"]} == {"generation_error"}
    assert aggregates["n_generation_error"] == 7.0 and aggregates["generation_error_rate"] == 1.0
    assert aggregates["n_unanswerable_ok"] == 0.0 and "refusal_accuracy" not in aggregates
    assert "f1" not in aggregates  # no answer, no correctness score
    assert "WARNING: 7 of 7 generator calls failed" in proc.stdout
    assert sum("HTTP 500" in e for e in errors) == 1 and sum("HTTP 401" in e for e in errors) == 6
    assert all("Incorrect API key provided: Bearer <redacted>" in e for e in errors if "HTTP 401" in e), errors
    assert_outputs_exist(tmp_path, calls_cached=False)  # failed calls are not cached
    assert key not in proc.stdout and key not in proc.stderr
    assert files_containing(tmp_path, key) == []


@pytest.mark.parametrize("group, override", [
    ("generator", "+generator.model.api_key"),
    ("judge", "+judge.chat_model.api_key"),
])
def test_api_key_in_config_is_refused_naming_the_field(tiny_dataset, tmp_path, group, override):
    key = new_secret()
    overrides = ["generator=openai"] + (["judge=openai"] if group == "judge" else []) + [f"{override}={key}"]
    with FakeOpenAIServer() as server:
        proc = run_ragexp(tmp_path, tiny_dataset, server, "", *overrides)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert re.search(rf"field '{group}\.[\w.]*api_key'", proc.stderr), proc.stderr[-2000:]
    assert "api_key_env" in proc.stderr and "Traceback" not in proc.stderr
    assert key not in proc.stderr and key not in proc.stdout  # the refused value is not echoed
    assert server.hits == 0
    db = tmp_path / "mlflow.db"
    if db.exists():
        client = MlflowClient(f"sqlite:///{db}")
        experiment = client.get_experiment_by_name("secrets")
        assert experiment is None or not client.search_runs([experiment.experiment_id])
    assert files_containing(tmp_path, key) == []  # refused before Hydra writes .hydra/overrides.yaml


LEAKS = {
    # the key typed where the variable's NAME belongs
    "api-key-env-holds-the-key": (("generator=openai", "generator.model.api_key_env={key}"), "generator.model.api_key_env"),
    "judge-api-key-env-holds-the-key": (("generator=openai", "judge=openai", "judge.chat_model.api_key_env={key}"),
                                        "judge.chat_model.api_key_env"),
    "key-in-base-url": (("generator=openai", "generator.model.base_url=http://u:{key}@127.0.0.1:9/v1"), "generator.model.base_url"),
    "upper-case-api-key-added": (("generator=openai", "+generator.model.API_KEY={key}"), "generator.model.API_KEY"),
    "upper-case-api-key-no-plus": (("generator=openai", "generator.model.API_KEY={key}"), "generator.model.API_KEY"),
    "authorization-header": (("generator=openai", "+generator.model.headers.Authorization=Bearer {key}"),
                             "generator.model.headers.Authorization"),
    "key-in-tracking-uri": (("tracking.uri=postgresql://ragexp:{key}@127.0.0.1:9/mlflow",), "tracking.uri"),
    "key-through-env-interpolation": (("generator=openai", "generator.model.base_url=${{oc.env:LEAKY_URL}}"),
                                      "generator.model.base_url"),
    "key-in-users-config-file": (("hydra.searchpath=[file://{conf}]", "experiment=leaky"), "generator.model.api_key_env"),
}


@pytest.mark.parametrize("overrides, field", LEAKS.values(), ids=LEAKS)
def test_a_key_anywhere_in_the_config_is_refused_and_written_nowhere(tiny_dataset, tmp_path, monkeypatch, overrides, field):
    """Each way a key reached the store, the artifacts, ``outputs/.hydra`` or an error line in
    issue #13: refused with exit 2 and one line naming the field, before anything is written."""
    key = new_secret()
    conf = tmp_path / "user_conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "leaky.yaml").write_text(
        f"# @package _global_\ndefaults:\n  - override /generator: openai\ngenerator:\n  model:\n    api_key_env: {key}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LEAKY_URL", f"http://u:{key}@127.0.0.1:9/v1")
    with FakeOpenAIServer() as server:
        proc = run_ragexp(tmp_path, tiny_dataset, server, key, *(o.format(key=key, conf=conf) for o in overrides))
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"ragexp run: error: field '{field}': "), lines[0]
    assert "Traceback" not in proc.stderr and server.hits == 0
    assert key not in proc.stdout + proc.stderr and key[len("sk-ragexp-"):] not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists() and not list(tmp_path.rglob(".hydra"))  # refused before Hydra wrote, or cleaned
    written = [f for f in files_containing(tmp_path, key[len("sk-ragexp-"):]) if not f.startswith("user_conf/")]
    assert written == []
