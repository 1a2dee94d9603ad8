"""What a sweep costs, as a user sees it: the parent run in the MLflow UI (headless Chromium) shows
quality against p95 latency with the Pareto front, and ``ragexp compare`` prints the cost columns.

A real sweep with the served-latency probe (``cost.latency_queries``) is logged to a sqlite store,
a real ``mlflow server`` on 127.0.0.1 serves it, Debian's Chromium reads the parent run's page:
the "Quality against cost" lines (front, the cheapest config tied with the best) are on the page,
and the plot is loaded (an image the browser decoded, not a broken link). ``ragexp compare``'s
output is rendered as text in the same browser for its screenshot.

Screenshots go to ``test-artifacts/``. ``RAGEXP_UPDATE_SCREENSHOT=1`` runs the demo sweep
(``experiment=demo_sweep``: 18 configs, 20 queries served per config) instead of the tiny one and
copies the screenshots to ``docs/images/`` (docs/cost.md's).
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store
from tests.helpers.chromium import BROWSER_MARKS, UPDATE_SCREENSHOTS, close_mlflow_assistant, screenshot
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Iterator[tuple[str, MlflowClient, object, Path, Path]]:
    """``(server URL, client, parent run, working folder, store)`` of one sweep with served latency."""
    root = tmp_path_factory.mktemp("cost-ui")
    db = root / "mlflow.db"
    if UPDATE_SCREENSHOTS:
        sweep_args = ["experiment=demo_sweep"]
    else:
        corpus, evalset = write_tiny_dataset(root)
        sweep_args = ["-m", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
                      "retrieval=bm25,dense", "reranker=none,embedding", "cost.latency_queries=6"]
    client = MlflowClient(f"sqlite:///{db}")
    client.search_experiments(max_results=1)
    with mlflow_server(root, ["--backend-store-uri", f"sqlite:///{db}"], root / "mlflow-server.log", env=ENV) as (server, base):
        ragexp(root, "run", *sweep_args, f"tracking.uri=sqlite:///{db}", "progress=false", f"cache_dir={root}/cache")
        wait_until_healthy(server, base, root / "mlflow-server.log")
        [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        [parent] = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
        yield base, client, parent, root, db


def test_parent_run_shows_quality_against_p95_latency_with_the_front(sweep, page):
    base, client, parent, _, _ = sweep
    tags = client.get_run(parent.info.run_id).data.tags
    page.goto(f"{base}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}")
    close_mlflow_assistant(page)
    page.get_by_text("Show more", exact=True).click()  # MLflow folds long descriptions
    sync_api.expect(page.get_by_text("Quality against cost").first).to_be_visible()
    sync_api.expect(page.get_by_text("Cheapest config tied with the best").first).to_be_visible()
    front = tags["cost.pareto_front"].split(", ")
    sync_api.expect(page.get_by_text("Pareto front").first).to_be_visible()
    assert all(name in page.inner_text("body") for name in front)
    image = page.locator('img[src*="summary%2Fquality_vs_latency.png"]')
    sync_api.expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    image.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -220)")  # the cost lines above the plot stay in view
    screenshot(page, "mlflow-quality-vs-latency.png")


def test_compare_prints_the_cost_columns(sweep, page):
    _, _, _, root, db = sweep
    out = ragexp(root, "compare", "--tracking-uri", f"sqlite:///{db}", "--sort", "hit_rate_at_5").stdout
    header = out.splitlines()[0]
    assert "p95 ms" in header and "index MB" in header and "peak RSS MB" in header
    assert "served latency" in out
    page.set_content(f"<pre style='font: 13px monospace; margin: 12px'>$ ragexp compare --sort hit_rate_at_5\n"
                     f"{html.escape(out)}</pre>")
    screenshot(page, "compare-cost-columns.png", page.locator("pre"))
