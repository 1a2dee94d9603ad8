"""How long the MLflow UI takes to show a logged run, timed in headless Chromium.

Serves a sqlite store (``--store DIR`` holding ``mlflow.db`` and ``mlruns/``, as
``bench_whole_scale`` leaves each size's run) with a real ``mlflow server`` on 127.0.0.1 and
opens, in a fresh Debian Chromium page each time (no browser cache), the views a user opens on a
run; each is timed from ``page.goto`` until its first useful content is visible:

* runs table: the experiment's runs page, until the run's name links to it;
* run page: the run's overview, until its headline metric ``1_headline/hit_rate_at_5`` shows;
* metric charts: the run's model-metrics tab, until that metric's chart is drawn;
* results artifact: ``ragexp_results.json`` in the run's artifact viewer, until its text shows;
* per-query table: MLflow's evaluation view of the run's ``per_query.json``, until the first
  query id shows.

Each view is opened ``--repeats`` times; the median is printed with the load average, and the
byte size of the artifact each view reads (``--screenshots DIR``: each view as it was when timed).

    python -m benchmarks.bench_ui_views --store /tmp/ragexp-whole-scale-XXXX [--repeats 3] [--screenshots DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from mlflow.tracking import MlflowClient
from playwright import sync_api

from ragexp.evaluation.results import ARTIFACT_NAME
from ragexp.tracking import store
from ragexp.tracking.metric_names import to_mlflow
from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 120_000
METRIC = to_mlflow("hit_rate_at_5")


def views(base: str, experiment_id: str, run) -> dict[str, tuple[str, Callable[[sync_api.Page], None]]]:
    """name -> (URL, wait until the first useful content is visible)."""
    run_url = f"{base}/#/experiments/{experiment_id}/runs/{run.info.run_id}"
    first_query = json.loads(Path(run.info.artifact_uri.removeprefix("file://"), store.PER_QUERY_TABLE).read_text()
                             )["data"][0][0]
    evaluation = urllib.parse.urlencode({"compareRunsMode": "ARTIFACT",
                                         "searchFilter": f"attributes.run_id = '{run.info.run_id}'"})

    def visible(text: str, exact: bool = True) -> Callable[[sync_api.Page], None]:
        return lambda page: sync_api.expect(page.get_by_text(text, exact=exact).first).to_be_visible()

    return {
        "runs table": (f"{base}/#/experiments/{experiment_id}/runs",
                       lambda page: sync_api.expect(page.get_by_role("link", name=run.info.run_name, exact=True)
                                                    .first).to_be_visible()),
        "run page": (run_url, visible(METRIC)),
        "metric charts": (f"{run_url}/model-metrics",
                          lambda page: sync_api.expect(page.locator("figure, .js-plotly-plot, canvas, svg.main-svg")
                                                       .first).to_be_visible()),
        "results artifact": (f"{run_url}/artifacts/{ARTIFACT_NAME}", visible('"format"', exact=False)),
        "per-query table": (f"{base}/#/experiments/{experiment_id}/runs?{evaluation}", visible(first_query)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="folder with mlflow.db and mlruns/")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, help="save each view, as shown when timed, to a PNG here")
    args = parser.parse_args()
    folder = args.store.resolve()
    client = MlflowClient(f"sqlite:///{folder}/mlflow.db")
    [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
    [run] = client.search_runs([experiment.experiment_id], max_results=2)
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    sizes = {ARTIFACT_NAME: (artifacts / ARTIFACT_NAME).stat().st_size,
             store.PER_QUERY_TABLE: (artifacts / store.PER_QUERY_TABLE).stat().st_size}
    seconds: dict[str, list[float]] = {}
    with mlflow_server(folder, ["--backend-store-uri", f"sqlite:///{folder}/mlflow.db"], folder / "mlflow-server.log"
                       ) as (server, base):
        wait_until_healthy(server, base, folder / "mlflow-server.log")
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            sync_api.expect.set_options(timeout=TIMEOUT_MS)
            for repeat in range(args.repeats + 1):  # the first round warms the server (its first requests are slow)
                for name, (url, ready) in views(base, experiment.experiment_id, run).items():
                    context = browser.new_context(viewport={"width": 1600, "height": 1000})
                    page = context.new_page()
                    page.set_default_timeout(TIMEOUT_MS)
                    started = time.perf_counter()
                    page.goto(url)
                    ready(page)
                    if repeat:
                        seconds.setdefault(name, []).append(time.perf_counter() - started)
                    if args.screenshots and repeat == args.repeats:
                        args.screenshots.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=args.screenshots / f"{name.replace(' ', '-')}.png")
                    context.close()
            browser.close()
    print(f"run {run.info.run_id} ({run.data.params.get('n_queries')} queries); {ARTIFACT_NAME} "
          f"{sizes[ARTIFACT_NAME] / 1e6:.2f} MB, {store.PER_QUERY_TABLE} {sizes[store.PER_QUERY_TABLE] / 1e6:.2f} MB; "
          f"load {os.getloadavg()[0]:.2f}")
    for name, values in seconds.items():
        print(f"{name:18s} median {statistics.median(values):6.2f} s  (all: {', '.join(f'{v:.2f}' for v in values)})")
    print(json.dumps({"seconds": seconds, "sizes": sizes, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
