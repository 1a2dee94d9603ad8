"""The MLflow UI, driven by headless Chromium, shows what a ragexp sweep logged.

A small real BM25 sweep is written to a sqlite store, a real ``mlflow server`` serves it, and
Debian's Chromium (never a downloaded browser) checks three pages: the experiment's runs table
(every job run under its sweep parent, metric columns with the store's values), the compare page
of the job runs (names, metric keys plotted), and one run's ``ragexp_results.json`` artifact preview.
Screenshots go to ``test-artifacts/``; with ``RAGEXP_UPDATE_SCREENSHOT=1`` the compare page also
replaces ``docs/images/mlflow-compare.png`` (the README picture).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from mlflow_server import mlflow_server, wait_until_healthy
from test_runner_sweep import ENV, dataset_args, job_runs, ragexp

from ragexp.evaluation import results

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
README_SCREENSHOT = REPO / "docs" / "images" / "mlflow-compare.png"
METRICS = ("hit_rate_at_5", "recall_at_5", "mrr", "ndcg_at_10")
UI_TIMEOUT_MS = 60_000
RUN_NAME_CELL = '[role="gridcell"][col-id="attributes.`Run Name`"]'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)"),
]


@pytest.fixture()
def served_sweep(tiny_dataset, tmp_path) -> Iterator[tuple[str, Path]]:
    """(base URL, sqlite file): a real ``mlflow server`` on a store holding one sweep of four BM25 jobs.

    The sweep (2 chunkers x 2 chunk sizes) runs while the server starts: both are slow imports. The
    fresh store's schema is migrated once beforehand, so the two processes never migrate it at once.
    The runs' artifacts live under ``tmp_path/mlruns`` as plain local paths, which the server reads
    directly (see :func:`mlflow_server.mlflow_server` for how the server is run and stopped).
    """
    db = tmp_path / "mlflow.db"
    MlflowClient(f"sqlite:///{db}").search_experiments(max_results=1)
    log = tmp_path / "mlflow-server.log"
    with mlflow_server(tmp_path, ["--backend-store-uri", f"sqlite:///{db}"], log, env=ENV) as (server, base):
        ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "retrieval=bm25", "chunking=fixed,recursive",
               "chunking.size=120,240", "chunking.overlap=20")
        wait_until_healthy(server, base, log)
        yield base, db


@pytest.fixture()
def browser_page() -> Iterator[sync_api.Page]:
    """A fresh headless Chromium page; every wait and expectation gives up after ``UI_TIMEOUT_MS``.

    Full HD, so the runs grid (which renders only the columns in view) shows all four metric columns.
    """
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            page.set_default_timeout(UI_TIMEOUT_MS)
            sync_api.expect.set_options(timeout=UI_TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def close_assistant_panel(page: sync_api.Page) -> None:
    """Hide the "MLflow Assistant" side panel (open by default) so the runs table gets the width."""
    close = page.locator('[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.is_visible():
        close.click()


def check_runs_table(page: sync_api.Page, base: str, experiment_id: str, parent, children) -> None:
    """Job runs nest under the sweep run; chosen metric columns show each run's stored values."""
    page.goto(f"{base}/#/experiments/{experiment_id}/runs")
    try:
        parent_cell = page.locator(RUN_NAME_CELL).filter(has_text=parent.info.run_name)
        sync_api.expect(parent_cell).to_be_visible()
        close_assistant_panel(page)
        parent_cell.get_by_role("button").click()  # the expander: job runs are children of the sweep run
        for child in children:
            sync_api.expect(page.get_by_role("link", name=child.info.run_name, exact=True)).to_be_visible()

        page.get_by_role("button", name="Columns", exact=True).click()
        search = page.get_by_placeholder("Search columns")
        for metric in METRICS:
            search.fill(metric)
            title = page.locator(".du-bois-light-tree-title", has_text=re.compile(f"^{re.escape(metric)}$"))
            page.locator(".du-bois-light-tree-treenode").filter(has=title).locator(".du-bois-light-tree-checkbox").click()
        page.keyboard.press("Escape")

        for metric in METRICS:
            header = page.locator(f'[role="columnheader"][col-id="metrics.`{metric}`"]')
            sync_api.expect(header).to_be_visible()
            sync_api.expect(header).to_contain_text(metric)
            for child in children:
                cell = page.locator(f'[role="row"][row-id="{child.info.run_id}"] [col-id="metrics.`{metric}`"]')
                sync_api.expect(cell).to_have_text(re.compile(r"^\d"))
                shown = float(cell.inner_text())
                assert shown == pytest.approx(child.data.metrics[metric], rel=1e-9), (metric, child.info.run_name)
    finally:
        page.screenshot(path=ARTIFACTS / "mlflow-runs-table.png")


def check_compare_page(page: sync_api.Page, base: str, experiment_id: str, children) -> None:
    """The compare page names every job run, plots the headline metrics and lists the runs' artifacts."""
    run_ids = urllib.parse.quote(json.dumps([child.info.run_id for child in children]))
    page.goto(f"{base}/#/compare-runs?runs={run_ids}&experiments={urllib.parse.quote(json.dumps([experiment_id]))}")
    try:
        sync_api.expect(page.get_by_text(f"Comparing {len(children)} Runs from 1 Experiment")).to_be_visible()
        for child in children:
            sync_api.expect(page.get_by_role("cell", name=child.info.run_name, exact=True)).to_be_visible()

        chosen = page.locator('div:text-is("Metrics:") + div')  # the parallel-coordinates metric picker
        already = set(chosen.locator(".du-bois-light-select-selection-item-content").all_inner_texts())
        chosen.click()
        for metric in (m for m in METRICS if m not in already):
            page.keyboard.type(metric)
            page.locator(f'.du-bois-light-select-item-option[title="{metric}"]').click()
        page.keyboard.press("Escape")
        for metric in METRICS:
            axis_title = page.locator(".pcp-plot text", has_text=re.compile(f"^{re.escape(metric)}$"))
            sync_api.expect(axis_title).to_be_visible()
        page.evaluate("document.activeElement.blur()")  # no focus ring or hover tooltip in the screenshot
        page.mouse.move(0, 0)
    finally:
        page.screenshot(path=ARTIFACTS / "mlflow-compare.png")
    sync_api.expect(page.get_by_text(results.ARTIFACT_NAME, exact=True).first).to_be_visible()


def check_artifact_preview(page: sync_api.Page, base: str, experiment_id: str, run) -> None:
    """The server reads the run's artifact files: ragexp_results.json opens in the preview."""
    page.goto(f"{base}/#/experiments/{experiment_id}/runs/{run.info.run_id}/artifacts")
    try:
        page.get_by_text(results.ARTIFACT_NAME, exact=True).click()
        sync_api.expect(page.get_by_text(f'"{results.FORMAT}"')).to_be_visible()
        sync_api.expect(page.get_by_text(f'"{run.info.run_id}"')).to_be_visible()
    finally:
        page.screenshot(path=ARTIFACTS / "mlflow-artifact-preview.png")


def test_mlflow_ui_shows_sweep_runs_metrics_compare_page_and_artifacts(served_sweep, browser_page):
    base, db = served_sweep
    _, parents, children = job_runs(db)
    assert len(parents) == 1 and len(children) == 4
    children.sort(key=lambda run: run.info.run_name)
    experiment_id = parents[0].info.experiment_id
    ARTIFACTS.mkdir(exist_ok=True)

    check_runs_table(browser_page, base, experiment_id, parents[0], children)
    check_compare_page(browser_page, base, experiment_id, children)
    if os.environ.get("RAGEXP_UPDATE_SCREENSHOT") == "1":
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / "mlflow-compare.png", README_SCREENSHOT)
    check_artifact_preview(browser_page, base, experiment_id, children[0])
