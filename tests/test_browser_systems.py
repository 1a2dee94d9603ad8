"""What a user sees in the MLflow UI after scoring their own system beside a reference pipeline,
in headless Chromium (Debian's, never a downloaded browser) against a real ``mlflow server``:
the experiment's runs page names the black-box run by its endpoint beside the reference run, with
the same headline columns, and the run's page lists how much of what it returned was placed
(``black_box/located_rate``) and its endpoint latency (``cost/endpoint_latency_p50_ms``)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.chromium import BROWSER_MARKS, close_mlflow_assistant, launched, new_page, screenshot
from tests.helpers.cli import ENV, dataset_args, job_runs, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.system_server import serve
from tests.test_systems_cache_and_reproduce import keyword_system

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS


def test_a_black_box_run_beside_a_reference_run_in_the_mlflow_ui(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    args = [*dataset_args(tiny_dataset, db), f"cache_dir={tmp_path / 'cache'}"]
    MlflowClient(f"sqlite:///{db}").search_experiments(max_results=1)  # the schema migrated once, before the server
    with serve(keyword_system) as system, \
            mlflow_server(tmp_path, ["--backend-store-uri", f"sqlite:///{db}"], tmp_path / "server.log", env=ENV) as (server, base):
        ragexp(tmp_path, "run", *args, "system=http", f"system.url={system.url}", "--allow-endpoint", system.url)
        ragexp(tmp_path, "run", *args, "retrieval=bm25")
        wait_until_healthy(server, base, tmp_path / "server.log")
        client, _, runs = job_runs(db)
        black_box = next(r for r in runs if r.info.run_name.startswith("http: "))
        reference = next(r for r in runs if r is not black_box)
        with launched() as browser:
            page = new_page(browser)
            page.goto(f"{base}/#/experiments/{black_box.info.experiment_id}/runs")
            close_mlflow_assistant(page)
            for run in (black_box, reference):
                sync_api.expect(page.get_by_role("link", name=run.info.run_name, exact=True)).to_be_visible()
            screenshot(page, "mlflow-system-beside-reference.png")
            page.goto(f"{base}/#/experiments/{black_box.info.experiment_id}/runs/{black_box.info.run_id}")
            close_mlflow_assistant(page)
            for metric in ("black_box/located_rate", "cost/endpoint_latency_p50_ms", "1_headline/hit_rate_at_5"):
                sync_api.expect(page.get_by_text(metric, exact=True).first).to_be_visible()
            screenshot(page, "mlflow-system-run.png")
    assert black_box.data.metrics["black_box/located_rate"] == 1.0
