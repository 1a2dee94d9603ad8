"""What a user sees first in the MLflow UI after a 3x3 sweep, checked in headless Chromium.

A real ``ragexp run -m chunking=fixed,recursive,markdown retrieval=bm25,dense,hybrid_rrf`` is
written to a sqlite store, a real ``mlflow server`` on 127.0.0.1 serves it, and Debian's Chromium
(never a downloaded browser) reads the rendered pages:

- the experiment page names each child run by its chunking and retrieval, and one click on the
  description's link opens the ragexp view: the names in full, the headline metric columns with
  the stored values, best hit rate@5 first;
- the chart view opens on the ``1_headline`` section;
- one run's per-query table, in MLflow's evaluation view, filters down to exactly that run's
  retrieval failures (computed here from its ``ragexp_results.json``), and the same query shows
  side by side in two runs;
- the ragexp view shows each headline metric's CI bounds and its tie mark (``ragexp.vs_best.<m>``:
  best / tied / worse) beside it, every header whole;
- the sweep's parent run shows its summary: tie set, noise line, heatmap.

Screenshots go to ``test-artifacts/``. ``RAGEXP_UPDATE_SCREENSHOT=1`` runs the sweep on the demo
dataset instead of the tiny one and copies the screenshots to ``docs/images/`` (the README's).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.comparison import vs_best
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.tracking import store
from ragexp.tracking.metric_names import to_mlflow
from tests.helpers.chromium import ARTIFACTS, BROWSER_MARKS, UI_TIMEOUT_MS, UPDATE_SCREENSHOTS, close_mlflow_assistant, screenshot
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

CHUNKINGS = ("fixed", "recursive", "markdown")
RETRIEVALS = ("bm25", "dense", "hybrid_rrf")
HEADLINE = ("hit_rate_at_5", "mrr", "ndcg_at_5")

pytestmark = BROWSER_MARKS


@dataclass
class Sweep:
    base: str
    client: MlflowClient
    experiment_id: str
    parent: object
    children: list

    def child(self, chunking: str, retrieval: str):
        return next(c for c in self.children
                    if c.data.tags["axis.chunking"] == chunking and c.data.tags["axis.retrieval"] == retrieval)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Iterator[Sweep]:
    """A real ``mlflow server`` on a store holding one 3x3 sweep (logged while the server starts:
    both are slow imports; the fresh store's schema is migrated once beforehand, so the two
    processes never migrate it at once). The experiment is the eval set's default one."""
    root = tmp_path_factory.mktemp("ui")
    db = root / "mlflow.db"
    if UPDATE_SCREENSHOTS:
        data_args = ["dataset=demo"]
    else:
        corpus, evalset = write_tiny_dataset(root)
        data_args = ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}"]
    client = MlflowClient(f"sqlite:///{db}")
    client.search_experiments(max_results=1)
    with mlflow_server(root, ["--backend-store-uri", f"sqlite:///{db}"], root / "mlflow-server.log", env=ENV) as (server, base):
        ragexp(root, "run", "-m", *data_args, f"tracking.uri=sqlite:///{db}", "progress=false",
               f"chunking={','.join(CHUNKINGS)}", f"retrieval={','.join(RETRIEVALS)}")
        wait_until_healthy(server, base, root / "mlflow-server.log")
        [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        [parent] = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
        children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
        assert len(children) == 9 and all(c.info.status == "FINISHED" for c in children)
        yield Sweep(base, client, experiment.experiment_id, parent, children)


def scroll_to_column(page: sync_api.Page, col_id: str) -> None:
    """Scroll the runs table sideways until column ``col_id`` is rendered (the grid renders only
    the columns in view: each headline metric brings its CI bounds and tie mark, wider than a screen)."""
    viewport = page.locator(".ag-body-horizontal-scroll-viewport").first
    header = page.locator(f'[role="columnheader"][col-id="{col_id}"]')
    viewport.evaluate("v => { v.scrollLeft = 0; }")
    for _ in range(20):
        if header.count() and header.first.is_visible():
            try:  # the grid may re-render the header cell while the scroll settles: look again
                header.first.scroll_into_view_if_needed(timeout=5_000)
                return
            except sync_api.Error:
                page.wait_for_timeout(200)
                continue
        viewport.evaluate("v => { v.scrollLeft += 300; }")
        page.wait_for_timeout(200)
    raise AssertionError(f"column {col_id} not found in the runs table")


def results_of(sweep: Sweep, run) -> RunResults:
    local = sweep.client.download_artifacts(run.info.run_id, ARTIFACT_NAME, dst_path=str(ARTIFACTS))
    return RunResults.load(local)


def retrieval_failures(results: RunResults) -> set[str]:
    """Queries with gold evidence and no relevant unit among the first ``context_k`` retrieved:
    computed from the ranking and relevance in the results file, not from ragexp's table."""
    depth = results.meta["context_k"]
    return {row.query_id for row in results.per_query
            if any(g > 0 for g in row.relevant.values())
            and not any(row.relevant.get(unit, 0) > 0 for unit, _ in row.ranking[:depth])}


def test_one_click_from_the_first_screen_shows_full_names_and_headline_columns(sweep, page):
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/runs")
    close_mlflow_assistant(page)
    # First visit: the sweep's parent is expanded (children are evaluation runs), no click needed.
    for child in sweep.children:
        sync_api.expect(page.get_by_role("link", name=child.info.run_name, exact=True)).to_be_attached()
    screenshot(page, "mlflow-first-screen.png")

    with page.context.expect_page() as opened:  # the documented one click (MLflow opens description links in a new tab)
        page.get_by_role("link", name="Open the ragexp view").click()
    page = opened.value
    page.set_default_timeout(UI_TIMEOUT_MS)
    close_mlflow_assistant(page)
    sync_api.expect(page.get_by_text("ragexp: headline metrics")).to_be_visible()
    for chunking in CHUNKINGS:
        for retrieval in RETRIEVALS:
            child = sweep.child(chunking, retrieval)
            name = child.info.run_name
            assert name.endswith(f" · {retrieval}") and name.split("-")[0] == chunking, name
            link = page.get_by_role("link", name=name, exact=True)
            sync_api.expect(link).to_be_visible()
            cut = link.evaluate("e => { const c = e.closest('[role=gridcell]'); return c.scrollWidth > c.clientWidth }")
            assert not cut, f"run name {name!r} is cut off in the runs table"
            for metric in HEADLINE:
                cell = page.locator(f'[role="row"][row-id="{child.info.run_id}"] [col-id="metrics.`{to_mlflow(metric)}`"]')
                scroll_to_column(page, f"metrics.`{to_mlflow(metric)}`")
                sync_api.expect(cell).to_have_text(re.compile(r"^\d"))
                assert float(cell.inner_text()) == pytest.approx(child.data.metrics[to_mlflow(metric)], rel=1e-9)
    for metric in HEADLINE:
        header = page.locator(f'[role="columnheader"][col-id="metrics.`{to_mlflow(metric)}`"]')
        scroll_to_column(page, f"metrics.`{to_mlflow(metric)}`")
        sync_api.expect(header).to_be_visible()
    scroll_to_column(page, f"metrics.`{to_mlflow('hit_rate_at_5')}`")
    first_row = page.locator('[role="row"][row-index="0"] [col-id="metrics.`1_headline/hit_rate_at_5`"]').first
    best = max(c.data.metrics[to_mlflow("hit_rate_at_5")] for c in sweep.children)
    assert float(first_row.inner_text()) == pytest.approx(best, rel=1e-9)  # sorted: best hit rate@5 first
    # beside hit rate@5: its CI bounds and its standing against the best (the tie mark), headers whole
    ci_low, ci_high, tie = ("metrics.`ci/hit_rate_at_5_low`", "metrics.`ci/hit_rate_at_5_high`",
                            "tags.`ragexp.vs_best.hit_rate_at_5`")
    for column in (f"metrics.`{to_mlflow('hit_rate_at_5')}`", ci_low, ci_high, tie):
        header = page.locator(f'[role="columnheader"][col-id="{column}"]')
        sync_api.expect(header).to_be_visible()
        label = column.split("`")[1]
        sync_api.expect(header).to_contain_text(label.rsplit("/", 1)[-1])
        cut = header.evaluate("h => Array.from(h.querySelectorAll('*')).filter(e => e.children.length === 0 && "
                              "e.textContent.trim()).some(e => e.scrollWidth > e.clientWidth + 1)")
        assert not cut, f"column header {label!r} is cut off"
    statuses = {}
    for child in sweep.children:
        row = page.locator(f'[role="row"][row-id="{child.info.run_id}"]')
        low = float(row.locator(f'[col-id="{ci_low}"]').inner_text())
        high = float(row.locator(f'[col-id="{ci_high}"]').inner_text())
        value = child.data.metrics[to_mlflow("hit_rate_at_5")]
        assert low <= value <= high
        statuses[child.info.run_id] = row.locator(f'[col-id="{tie}"]').inner_text().strip()
    tags = {c.info.run_id: sweep.client.get_run(c.info.run_id).data.tags["ragexp.vs_best.hit_rate_at_5"]
            for c in sweep.children}
    assert statuses == tags and list(tags.values()).count("best") == 1
    page.locator(".ag-body-horizontal-scroll-viewport").first.evaluate("v => { v.scrollLeft = 0; }")
    page.wait_for_timeout(300)
    screenshot(page, "mlflow-runs-view.png")


def test_chart_view_opens_on_the_headline_section(sweep, page):
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/runs?compareRunsMode=CHART")
    close_mlflow_assistant(page)
    area = page.locator('[data-testid="experiment-view-compare-runs-chart-area"]')
    sections = area.get_by_role("figure")
    sync_api.expect(sections.filter(has_text="1_headline")).to_be_visible()
    titles = [" ".join(t.split()) for t in sections.all_inner_texts()]
    assert titles[0].startswith("1_headline ("), titles  # the first section, above ci/, doc/, retrieval/, tag/ ...
    sync_api.expect(area.get_by_text(to_mlflow("hit_rate_at_5"), exact=True).first).to_be_visible()
    screenshot(page, "mlflow-charts.png")


def evaluation_view(sweep: Sweep, page: sync_api.Page, runs) -> None:
    """MLflow's evaluation view (the runs page's table icon) restricted to ``runs`` (sorted by a
    metric, so the sweep's parent is not pulled in as the children's nest)."""
    ids = ", ".join(f"'{run.info.run_id}'" for run in runs)
    query = urllib.parse.urlencode({"compareRunsMode": "ARTIFACT", "searchFilter": f"attributes.run_id IN ({ids})",
                                    "orderByKey": f"metrics.`{to_mlflow('hit_rate_at_5')}`", "orderByAsc": "false"})
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/runs?{query}")
    close_mlflow_assistant(page)
    sync_api.expect(page.get_by_text(store.PER_QUERY_TABLE).first).to_be_visible()


def shown_query_ids(page: sync_api.Page, candidates) -> set[str]:
    """The query ids the evaluation view shows, scrolling through it (it renders only the rows in view)."""
    wanted, seen, unchanged = set(candidates), set(), 0
    page.mouse.move(900, 650)  # over the table
    while unchanged < 3:
        texts = page.evaluate("Array.from(document.querySelectorAll('main *')).filter(e => !e.children.length)"
                              ".map(e => e.textContent.trim())")
        now = wanted & set(texts)
        unchanged = unchanged + 1 if now <= seen else 0
        seen |= now
        page.mouse.wheel(0, 500)
        page.wait_for_timeout(300)
    return seen


def test_per_query_table_filters_to_the_runs_retrieval_failures(sweep, page):
    run = sweep.child("fixed", "bm25")
    results = results_of(sweep, run)
    failures = retrieval_failures(results)
    assert failures, "the bm25 run has no retrieval failure to filter to"
    evaluation_view(sweep, page, [run])
    all_ids = [row.query_id for row in results.per_query]
    sync_api.expect(page.get_by_text(all_ids[0], exact=True)).to_be_visible()
    page.get_by_label('Select "group by" columns').click()
    page.get_by_role("option", name="failure_class").click()
    page.keyboard.press("Escape")
    page.get_by_placeholder("Filter by query_id, failure_class").fill("retrieval_failure")
    other = next(qid for qid in all_ids if qid not in failures)
    sync_api.expect(page.get_by_text(other, exact=True)).to_have_count(0)  # the (debounced) filter applied
    assert shown_query_ids(page, all_ids) == failures
    screenshot(page, "mlflow-retrieval-failures.png")


def test_the_same_query_side_by_side_in_two_runs(sweep, page):
    bm25, dense = sweep.child("fixed", "bm25"), sweep.child("fixed", "dense")
    results = results_of(sweep, bm25)
    failure = min(retrieval_failures(results) - retrieval_failures(results_of(sweep, dense)))  # dense finds it
    other = next(row.query_id for row in results.per_query if row.query_id != failure)
    evaluation_view(sweep, page, [bm25, dense])
    sync_api.expect(page.get_by_text(other, exact=True)).to_be_visible()
    screenshot(page, "mlflow-per-query.png")  # every query, the two runs' outcomes side by side
    page.get_by_placeholder("Filter by query_id").fill(failure)
    sync_api.expect(page.get_by_text(other, exact=True)).to_have_count(0)  # the (debounced) filter applied
    query_cell = page.get_by_text(failure, exact=True)
    sync_api.expect(query_cell).to_have_count(1)
    row_top = query_cell.bounding_box()["y"]
    outcomes = {}
    for run in (bm25, dense):
        table = json.loads(Path(sweep.client.download_artifacts(run.info.run_id, store.PER_QUERY_TABLE,
                                                                dst_path=str(ARTIFACTS / run.info.run_id))).read_text())
        columns = table["columns"]
        record = next(r for r in table["data"] if r[columns.index("query_id")] == failure)
        outcomes[run.info.run_name] = record[columns.index("outcome")]
    assert "miss" in outcomes[bm25.info.run_name] and outcomes[dense.info.run_name].startswith("rank ")
    assert "hit@" in outcomes[dense.info.run_name]
    for outcome in outcomes.values():  # each run's cell, in the query's row
        cell = page.get_by_text(outcome, exact=True).first
        sync_api.expect(cell).to_be_visible()
        assert abs(cell.bounding_box()["y"] - row_top) < 5, (outcome, cell.bounding_box(), row_top)


def test_parent_run_shows_the_sweep_summary(sweep, page):
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/runs/{sweep.parent.info.run_id}")
    close_mlflow_assistant(page)
    sync_api.expect(page.get_by_text(re.compile(r"^Best of 9 runs"))).to_be_visible()
    page.get_by_text("Show more", exact=True).click()  # MLflow folds long descriptions
    image = page.locator('img[src*="summary%2Fheatmap_hit_rate_at_5.png"]')  # MLflow drops the alt text
    sync_api.expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    best = max(sweep.children, key=lambda c: c.data.metrics[to_mlflow("hit_rate_at_5")])
    value = best.data.metrics[to_mlflow("hit_rate_at_5")]
    assert sweep.client.get_run(sweep.parent.info.run_id).data.tags["best.hit_rate_at_5"].split(" = ")[1].startswith(f"{value:.4f}")
    # the tie set and the noise line, not one crowned winner
    tied = [c for c in sweep.children
            if sweep.client.get_run(c.info.run_id).data.tags["ragexp.vs_best.hit_rate_at_5"] == "tied"]
    n = int(best.data.params["n_queries"])
    claim = (f"{len(tied) + 1} configs are indistinguishable on hit_rate_at_5 at n={n}" if tied
             else f"is best on hit_rate_at_5 at n={n}")
    sync_api.expect(page.get_by_text(claim).first).to_be_visible()
    # the noise line: a minimum detectable difference, or at a ceiling the statement that none can show
    noise = (rf"at n={n} the best hit_rate_at_5 is {value:.2f}, at its (ceiling|floor): every query scores the same"
             if vs_best.at_ceiling(value) else rf"at n={n} a hit_rate_at_5 difference below ~0\.\d+ is noise")
    sync_api.expect(page.get_by_text(re.compile(noise)).first).to_be_visible()
    image.scroll_into_view_if_needed()
    screenshot(page, "mlflow-sweep-summary.png")
