"""MLflow's GenAI pages and the first screen on a ragexp sweep, in headless Chromium.

A real ``ragexp run -m`` with a generator and a judge is written to a sqlite store (with the
default ``tracking.traces=best``: the runs best or tied on hit rate@5 get one trace per query), a
real ``mlflow server`` on 127.0.0.1 serves it, and Debian's Chromium reads the rendered pages in a
fresh profile per test (a first visit: MLflow's Assistant panel opens by itself):

- GenAI -> Evaluation runs lists every run of the sweep;
- one run's query opens with its answer, its passages with their gold status (the first entry
  beside each passage) and the judge's verdicts with their rationale;
- two runs' traces of the same query side by side (MLflow's Compare);
- the first screen ``ragexp ui`` opens: with the Assistant panel open, the decision column
  (best / tied / worse, value ± CI) is whole beside the run names, the sweep's parent row (how many
  runs are best or tied, "heatmaps") is on screen without scrolling for a sweep of up to 16 runs,
  and its page names the best run above MLflow's "Show more" fold.

Screenshots go to ``test-artifacts/``; ``RAGEXP_UPDATE_SCREENSHOT=1`` runs the demo sweep
(``experiment=demo_sweep``) instead of the tiny one and copies them to ``docs/images/`` (docs/mlflow.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.commands.ui import newest_view_path
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.tracking import experiments, store
from ragexp.tracking.traces import TAG_TRACES
from tests.helpers.chromium import BROWSER_MARKS, MLFLOW_ASSISTANT_CLOSE, UPDATE_SCREENSHOTS, close_mlflow_assistant, screenshot
from tests.helpers.cli import ENV, ragexp
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy
from tests.helpers.tiny_dataset import write_tiny_dataset

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")

#: Runs whose rows fit in the runs table of a 1000-pixel-high window below MLflow's shared-view banner
#: (the 18-run demo sweep's parent is one scroll down: docs/mlflow.md).
FIRST_SCREEN_ROWS = 16

pytestmark = BROWSER_MARKS


@dataclass
class Sweep:
    base: str
    client: MlflowClient
    experiment_id: str
    parent: object
    children: list
    traced: list  # children with traces, best hit rate@5 first
    root: Path

    def results(self, run) -> RunResults:
        folder = self.root / "results" / run.info.run_id
        folder.mkdir(parents=True, exist_ok=True)
        return RunResults.load(self.client.download_artifacts(run.info.run_id, ARTIFACT_NAME, str(folder)))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Iterator[Sweep]:
    root = tmp_path_factory.mktemp("genai")
    db = root / "mlflow.db"
    if UPDATE_SCREENSHOTS:
        run_args = ["experiment=demo_sweep"]
    else:
        corpus, evalset = write_tiny_dataset(root)
        run_args = ["-m", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
                    "chunking=fixed,recursive", "retrieval=bm25,dense", "chunking.size=120", "chunking.overlap=20"]
    client = MlflowClient(f"sqlite:///{db}")
    client.search_experiments(max_results=1)  # migrated once, before the server starts
    with mlflow_server(root, ["--backend-store-uri", f"sqlite:///{db}"], root / "mlflow-server.log", env=ENV) as (server, base):
        ragexp(root, "run", *run_args, f"tracking.uri=sqlite:///{db}", "progress=false", "generator=extractive",
               "judge=lexical")
        wait_until_healthy(server, base, root / "mlflow-server.log")
        [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        [parent] = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "sweep"]
        children = [r for r in runs if r.data.tags.get(store.TAG_KIND) == "job"]
        hit = "1_headline/hit_rate_at_5"
        ranked = sorted(children, key=lambda r: r.data.metrics[hit], reverse=True)
        traced = [r for r in ranked if TAG_TRACES in r.data.tags]
        assert traced and {r.info.run_id for r in traced} == {
            r.info.run_id for r in children if r.data.tags["ragexp.vs_best.hit_rate_at_5"] in ("best", "tied")}
        if len(traced) < 2:  # a second run to compare with, traced on demand
            other = next(r for r in ranked if r not in traced)
            ragexp(root, "traces", other.info.run_id, "--tracking-uri", f"sqlite:///{db}")
            traced.append(other)
        yield Sweep(base, client, experiment.experiment_id, parent, children, traced, root)


def evaluation_runs(sweep: Sweep, page: sync_api.Page) -> None:
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/evaluation-runs")
    close_mlflow_assistant(page)
    sync_api.expect(page.locator('[data-component-id="mlflow.eval-runs.run-name-cell"]').first).to_be_visible()


def open_query(page: sync_api.Page, query: str) -> None:
    """Search the traces table for ``query`` (it renders only a page of rows) and open its trace."""
    search = page.get_by_placeholder("Search traces by id, request, or response")
    search.fill(query)
    search.press("Enter")
    page.get_by_text(query, exact=False).first.click()


def run_row(page: sync_api.Page, run):
    return page.locator('[data-component-id="mlflow.eval-runs.run-name-cell"]').filter(
        has_text=re.compile(rf"^{re.escape(run.info.run_name)}$"))


def test_evaluation_runs_lists_every_run_of_the_sweep(sweep, page):
    evaluation_runs(sweep, page)
    for child in sweep.children:
        sync_api.expect(run_row(page, child)).to_have_count(1)
    screenshot(page, "mlflow-genai-evaluation-runs.png")


def a_judged_query_with_gold_shown(results: RunResults):
    """A query with a relevant passage among those the trace shows and a judged claim."""
    depth = min(max(results.meta["ks"]), 10)
    return next(row for row in results.per_query
                if row.claims and any(row.relevant.get(unit, 0) > 0 for unit, _ in row.ranking[:depth]))


def test_a_query_opens_with_its_passages_gold_marked_answer_and_judge_rationale(sweep, page):
    run = sweep.traced[0]
    row = a_judged_query_with_gold_shown(sweep.results(run))
    evaluation_runs(sweep, page)
    run_row(page, run).dispatch_event("click")  # not a pointer click: the "open run page" icon covers a narrow name cell
    open_query(page, row.query)  # the trace of that query
    drawer = page.get_by_role("dialog")
    sync_api.expect(drawer.get_by_text(row.answer.strip()[:60], exact=False).first).to_be_visible()  # the answer
    drawer.get_by_text("retrieve", exact=True).first.click()
    gold_rank = next(rank for rank, (unit, _) in enumerate(row.ranking, start=1) if row.relevant.get(unit, 0) > 0)
    sync_api.expect(drawer.get_by_text('"relevant"').first).to_be_visible()  # the gold passage, marked beside it
    chips = drawer.get_by_text(re.compile(r'^"(relevant|unjudged|judged not relevant)"$'))
    shown = [text.strip('"') for text in chips.all_inner_texts()]
    expected = ["relevant" if row.relevant.get(unit, 0) > 0 else "judged not relevant" if unit in row.relevant else "unjudged"
                for unit, _ in row.ranking[:len(shown)]]
    assert shown == expected and shown[gold_rank - 1] == "relevant", (shown, expected)
    screenshot(page, "mlflow-genai-trace-passages.png")
    drawer.get_by_text(row.query_id, exact=True).first.click()  # the root span: the trace's assessments
    page.locator('[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]').first.click()
    card = page.locator("div").filter(has=page.get_by_text("faithfulness", exact=True)).filter(
        has=page.locator('[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]')).last
    card.locator('[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]').first.click()
    verdict = {True: "✓", False: "✗", None: "?"}[row.claims[0].supported]
    sync_api.expect(page.get_by_text(f"{verdict} {row.claims[0].claim[:40]}", exact=False).first).to_be_visible()
    sync_api.expect(page.get_by_text("expected_response", exact=True).first).to_be_attached()
    screenshot(page, "mlflow-genai-trace-judge.png")


def test_two_runs_same_query_side_by_side(sweep, page):
    first, second = sweep.traced[:2]
    row = a_judged_query_with_gold_shown(sweep.results(first))
    answers = {run.info.run_id: next(r for r in sweep.results(run).per_query if r.query_id == row.query_id).answer
               for run in (first, second)}
    evaluation_runs(sweep, page)
    for run in (first, second):
        page.locator('[role="row"]').filter(has=run_row(page, run)).locator(
            '[data-component-id="mlflow.eval-runs.checkbox-cell"]').click()
    page.locator('[data-component-id="mlflow.eval-runs.actions-button"]').click()
    page.get_by_role("menuitem", name="Compare").click()
    sync_api.expect(page.get_by_text("Comparing", exact=False).first).to_be_visible()
    open_query(page, row.query)
    sync_api.expect(page.get_by_text("Comparing 2 traces")).to_be_visible()
    for answer in answers.values():
        sync_api.expect(page.get_by_text(answer.strip()[:50], exact=False).first).to_be_visible()
    screenshot(page, "mlflow-genai-compare.png")


def test_the_first_screen_shows_what_decides_beside_the_assistant_panel(sweep, page):
    path = newest_view_path(sweep.client)  # what `ragexp ui` prints
    assert path == "/" + experiments.runs_link(sweep.experiment_id)
    page.goto(f"{sweep.base}{path}")
    decision = f"tags.`{experiments.DECISION_TAG}`"
    header = page.locator(f'[role="columnheader"][col-id="{decision}"]')
    sync_api.expect(header).to_be_visible()
    assistant = page.locator(MLFLOW_ASSISTANT_CLOSE)
    try:  # MLflow opens its Assistant over the right third on a first visit to a local server
        assistant.wait_for(state="visible", timeout=15_000)
        right_limit = page.get_by_text("MLflow Assistant").first.bounding_box()["x"]
    except sync_api.TimeoutError:
        right_limit = page.viewport_size["width"]
    page.wait_for_timeout(1000)
    for child in sweep.children:
        cell = page.locator(f'[role="row"][row-id="{child.info.run_id}"] [col-id="{decision}"]')
        sync_api.expect(cell).to_have_text(re.compile(r"^(best|tied|worse) · \d\.\d{3}"))
        box = cell.bounding_box()
        assert box["x"] + box["width"] <= right_limit, (box, right_limit)  # whole, left of the panel
        assert not cell.evaluate("c => c.scrollWidth > c.clientWidth + 1"), "the decision is cut off"
        tag = sweep.client.get_run(child.info.run_id).data.tags[experiments.DECISION_TAG]
        assert cell.inner_text().strip() == tag
    parent = page.locator(f'[role="row"][row-id="{sweep.parent.info.run_id}"] [col-id="{decision}"]')
    sync_api.expect(parent).to_have_text(re.compile(rf"^sweep · \d+/{len(sweep.children)} best or tied · heatmaps$"))
    if len(sweep.children) <= FIRST_SCREEN_ROWS:  # the sweep's answer on the first screen, no scrolling
        sync_api.expect(parent).to_be_in_viewport()
    box = parent.bounding_box()
    assert box["x"] + box["width"] <= right_limit
    assert not parent.evaluate("c => c.scrollWidth > c.clientWidth + 1"), "the parent's decision is cut off"
    screenshot(page, "mlflow-first-visit.png")
    page.goto(f"{sweep.base}/#/experiments/{sweep.experiment_id}/runs/{sweep.parent.info.run_id}")
    best = max(sweep.children, key=lambda c: c.data.metrics["1_headline/hit_rate_at_5"])
    # above MLflow's "Show more" fold: the best run on hit rate@5, linked (the heatmap is below the fold)
    sync_api.expect(page.get_by_role("link", name=best.info.run_name).first).to_be_visible()
    screenshot(page, "mlflow-parent-first-screen.png")
