"""ragexp against a real ``mlflow server``: a parallel sweep logs through HTTP, artifacts through the server.

The server owns a sqlite backend store and an artifact destination (``--artifacts-destination``,
served by the server itself). A two-job sweep runs with the joblib launcher (two worker processes
writing at once) against ``http://127.0.0.1:PORT`` only; the test then reads everything back
through the server: one FINISHED parent, two FINISHED children under it, and each child's
per-query table and resolved config downloadable, with the content of that job.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from tests.helpers.cli import ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.tiny_dataset import TINY_ITEMS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

CHUNKERS = ("fixed", "recursive")


def test_parallel_sweep_logs_runs_and_artifacts_through_a_tracking_server(tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    corpus, evalset = tiny_dataset
    artifacts = tmp_path / "artifacts"
    log = tmp_path / "mlflow-server.log"
    server_args = ["--backend-store-uri", f"sqlite:///{tmp_path / 'db.sqlite'}", "--artifacts-destination", str(artifacts)]
    with mlflow_server(tmp_path, server_args, log) as (server, base):
        started = time.monotonic()
        wait_until_healthy(server, base, log)
        print(f"mlflow server healthy after {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        ragexp(tmp_path, "run", "-m", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
               f"tracking.uri={base}", "tracking.experiment=served", "progress=false", "retrieval=bm25",
               f"chunking={','.join(CHUNKERS)}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
               f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'multirun'}")
        print(f"sweep took {time.monotonic() - started:.1f} s")

        client = MlflowClient(tracking_uri=base)
        experiment = client.get_experiment_by_name("served")
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        parents = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
        children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
        assert len(runs) == 3 and len(parents) == 1 and len(children) == 2, [r.info.run_name for r in runs]
        parent = parents[0]
        assert parent.info.status == "FINISHED"
        assert parent.data.metrics["sweep.children"] == 2 and parent.data.metrics["sweep.children_finished"] == 2
        assert sorted(c.data.params["chunking.name"] for c in children) == sorted(CHUNKERS)
        expected_ids = {item[0] for item in TINY_ITEMS} | {"t7"}
        for child in children:
            assert child.info.status == "FINISHED"
            assert child.data.tags[store.PARENT_TAG] == parent.info.run_id
            # proxied artifact storage: the client never wrote a path of its own
            assert child.info.artifact_uri.startswith("mlflow-artifacts:"), child.info.artifact_uri
            listed = {a.path for a in client.list_artifacts(child.info.run_id)}
            assert {store.PER_QUERY_TABLE, "config", "ragexp_results.json"} <= listed, listed

            target = tmp_path / "downloads" / child.info.run_id
            target.mkdir(parents=True)
            table = json.loads(Path(client.download_artifacts(child.info.run_id, store.PER_QUERY_TABLE,
                                                              str(target))).read_text(encoding="utf-8"))
            query_ids = [row[table["columns"].index("query_id")] for row in table["data"]]
            assert sorted(query_ids) == sorted(expected_ids)
            config = yaml.safe_load(Path(client.download_artifacts(child.info.run_id, store.CONFIG_ARTIFACT,
                                                                   str(target))).read_text(encoding="utf-8"))
            assert config["chunking"]["name"] == child.data.params["chunking.name"]
            assert config["tracking"]["uri"] == base and config["dataset"]["evalset"] == str(evalset)

            # ... and the bytes are in the server's artifact destination
            stored = list(artifacts.rglob(f"{child.info.run_id}/artifacts/{store.CONFIG_ARTIFACT}"))
            assert len(stored) == 1, sorted(str(p) for p in artifacts.rglob("*"))[:20]
    assert not (tmp_path / "mlruns").exists(), "ragexp wrote artifacts locally instead of through the server"
