"""What a sweep, a run and a reproduction leave in MLflow, through the real CLI on the tiny dataset:
one experiment per eval set, runs named and tagged by the sweep's axes, the flat per-query
table, real durations, the parent's summary, and a reproduction from a copied store folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from ragexp.comparison import vs_best
from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.tracking import experiments, store
from ragexp.tracking.metric_names import CONSTANTS, HEADLINE, results_view, to_mlflow
from tests.helpers.cli import ragexp

pytestmark = pytest.mark.slow


def data_args(corpus: Path, evalset: Path, db: Path) -> list[str]:
    return ["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", f"tracking.uri=sqlite:///{db}",
            "progress=false"]


def runs_of(client: MlflowClient, experiment_id: str, kind: str) -> list:
    runs = client.search_runs([experiment_id], max_results=1000)
    return [r for r in runs if r.data.tags.get(store.TAG_KIND) == kind]


def test_each_eval_set_gets_its_own_experiment_and_compare_refuses_to_mix_them(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    smaller = tmp_path / "smaller.jsonl"
    smaller.write_text("".join(evalset.read_text().splitlines(keepends=True)[:-2]), encoding="utf-8")  # one item less
    db = tmp_path / "mlflow.db"
    for path in (evalset, smaller):
        ragexp(tmp_path, "run", *data_args(corpus, path, db), "retrieval=bm25")
    client = MlflowClient(f"sqlite:///{db}")
    documents = load_corpus(corpus)
    expected = {f"tiny-{load_evalset(path, documents).fingerprint()[:8]}" for path in (evalset, smaller)}
    named = {e.name: e for e in client.search_experiments() if e.name != "Default"}
    assert set(named) == expected and len(expected) == 2
    jobs = []
    for experiment in named.values():
        [job] = runs_of(client, experiment.experiment_id, "job")
        assert experiment.name.endswith(job.data.tags[store.TAG_EVALSET_FP][:8])
        description = experiment.tags[store.DESCRIPTION_TAG]
        assert "eval set **tiny**" in description and experiments.runs_link(experiment.experiment_id) in description
        view = json.loads(json.loads(experiment.tags[experiments.VIEW_TAG])["state"])
        assert view["selectedColumns"][0] == f"metrics.`{to_mlflow('hit_rate_at_5')}`"
        jobs.append(job.info.run_id)
    proc = ragexp(tmp_path, "compare", *jobs, "--tracking-uri", f"sqlite:///{db}", check=False)
    assert proc.returncode == 2 and "2 different eval sets" in proc.stderr
    proc = ragexp(tmp_path, "compare", "--tracking-uri", f"sqlite:///{db}")  # the newest experiment: one eval set
    assert len(proc.stdout.strip().splitlines()) == 3  # header, rule, one run


def retrieval_class(row: dict, depth: int) -> str:
    if not any(g > 0 for g in row["relevant"].values()):
        return "no_gold"
    return "ok" if any(row["relevant"].get(unit, 0) > 0 for unit, _ in row["ranking"][:depth]) else "retrieval_failure"


def test_sweep_runs_are_named_tagged_timed_and_summarised(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "-m", *data_args(corpus, evalset, db), "chunking=fixed,recursive", "retrieval=bm25,dense",
           "chunking.size=120", "chunking.overlap=20", "eval.ks=[1,3,5]")
    client = MlflowClient(f"sqlite:///{db}")
    [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
    [parent] = runs_of(client, experiment.experiment_id, "sweep")
    children = runs_of(client, experiment.experiment_id, "job")
    assert parent.data.tags[store.TAG_SWEEP_AXES] == "chunking,retrieval" and len(children) == 4
    saved = {json.loads(path.read_text())["meta"]["run_name"]: path.parent for path in tmp_path.glob(f"multirun/*/*/*/{ARTIFACT_NAME}")}
    assert len(saved) == 4

    for child in children:
        tags, params = child.data.tags, child.data.params
        assert child.info.run_name == f"{params['chunking']} · {tags['axis.retrieval']}"
        assert tags["axis.chunking"] == params["chunking.name"] and tags[store.RUN_TYPE_TAG] == "evaluation"
        assert all(v not in ("None", "null") and not v.startswith("[") for v in params.values()), params
        assert params["eval.ks"] == "1,3,5" and ("embedding" in params) == (tags["axis.retrieval"] == "dense")
        assert {key for key in CONSTANTS if key in params} >= {"n_queries", "n_queries_no_gold", "n_chunks", "context_k"}
        assert not any(key.startswith("n_queries") for key in child.data.metrics)
        assert {to_mlflow(key) for key in ("hit_rate_at_5", "mrr", "ndcg_at_5")} <= set(child.data.metrics)
        results = RunResults.load(client.download_artifacts(child.info.run_id, ARTIFACT_NAME, str(tmp_path / child.info.run_id)))
        assert results_view(child.data.metrics, params) == pytest.approx(
            {**results.aggregates, **{f"time.{k}": v for k, v in results.meta["timings"].items()}}, nan_ok=True)
        # the run spans the job's work: at least the measured preparation and evaluation time
        worked_ms = 1000 * (results.meta["timings"]["total_s"] + results.meta["timings"]["prepare_s"])
        assert child.info.end_time - child.info.start_time >= worked_ms
        text = (Path(tmp_path / child.info.run_id) / ARTIFACT_NAME).read_text()
        assert len(text.splitlines()) > len(results.per_query)  # one query per line, not one 1 MB line
        # the logged files are the job's saved ones (rows and config copied), the results with their run id
        local = json.loads((saved[child.info.run_name] / ARTIFACT_NAME).read_text())
        assert json.loads(text) == {**local, "meta": {**local["meta"], "run_id": child.info.run_id}}
        logged_config = client.download_artifacts(child.info.run_id, store.CONFIG_ARTIFACT, str(tmp_path / child.info.run_id))
        assert Path(logged_config).read_text() == (saved[child.info.run_name] / "resolved.yaml").read_text()

        table = json.loads(Path(client.download_artifacts(child.info.run_id, store.PER_QUERY_TABLE,
                                                          str(tmp_path / child.info.run_id))).read_text())
        columns = table["columns"]
        # MLflow itself reads it as the run's table (the evaluation view lists runs' tables this way)
        assert json.loads(child.data.tags["mlflow.loggedArtifacts"]) == [{"path": store.PER_QUERY_TABLE, "type": "table"}]
        mlflow.set_tracking_uri(f"sqlite:///{db}")
        loaded = client.load_table(experiment.experiment_id, store.PER_QUERY_TABLE, run_ids=[child.info.run_id])
        assert list(loaded.columns)[:len(columns)] == columns and len(loaded) == len(table["data"])
        assert columns[:6] == ["query_id", "outcome", "query", "tags", "failure_class", "first_relevant_rank"]
        assert {"hit@1", "hit@5", "rr", "ndcg@5", "top_3", "gold_ids"} <= set(columns)
        for record, row in zip(table["data"], (r.to_dict() for r in results.per_query)):
            cell = dict(zip(columns, record))
            assert all(not isinstance(v, (list, dict)) for v in cell.values())  # flat: nothing to parse
            assert cell["query_id"] == row["query_id"]
            assert cell["failure_class"] == retrieval_class(row, results.meta["context_k"])
            assert cell["hit@5"] == row["metrics"].get("hit_rate_at_5") and cell["rr"] == row["metrics"].get("mrr")
            assert cell["top_3"] == ", ".join(unit for unit, _ in row["ranking"][:3])
            assert cell["first_relevant_rank"] == row["first_relevant_rank"]

    parent = client.get_run(parent.info.run_id)
    for metric in ("hit_rate_at_5", "mrr", "ndcg_at_5"):
        values = {c.info.run_name: c.data.metrics[to_mlflow(metric)] for c in children}
        best = max(values.values())
        name, _, rest = parent.data.tags[f"best.{metric}"].partition(" = ")
        assert values[name] == best and rest.startswith(f"{best:.4f}")
    summary = {a.path for a in client.list_artifacts(parent.info.run_id, "summary")}
    present = [m for m in HEADLINE if to_mlflow(m) in children[0].data.metrics]
    assert summary == {f"summary/heatmap_{m}.png" for m in present} | {"summary/compare.md", "summary/compare.html"}
    compare_md = Path(client.download_artifacts(parent.info.run_id, "summary/compare.md", str(tmp_path))).read_text()
    rows = [line for line in compare_md.splitlines()[2:] if line.startswith("|")]
    hit_rates = [float(line.split("|")[4].strip("*≈ ")) for line in rows]
    assert len(rows) == 4 and hit_rates == sorted(hit_rates, reverse=True)
    assert "summary%2Fheatmap_hit_rate_at_5.png" in parent.data.tags[store.DESCRIPTION_TAG]
    # every child's standing against the best; the best has no diff against itself, every other child one
    children = [client.get_run(c.info.run_id) for c in children]
    for metric in ("hit_rate_at_5", "mrr", "ndcg_at_5"):
        status = {c.info.run_name: c.data.tags[f"ragexp.vs_best.{metric}"] for c in children}
        assert sorted(status.values()).count("best") == 1 and set(status.values()) <= {"best", "tied", "worse"}
        assert parent.data.tags[f"best.{metric}"].startswith(next(n for n, s in status.items() if s == "best") + " = ")
    description = parent.data.tags[store.DESCRIPTION_TAG]
    top = max(c.data.metrics[to_mlflow("hit_rate_at_5")] for c in children)
    noise = "noise arithmetic is uninformative" if vs_best.at_ceiling(top) else "is noise"
    assert "at n=" in description and noise in description and "Bonferroni" in description
    for child in children:
        diff = {a.path for a in client.list_artifacts(child.info.run_id, "vs_best")}
        leader = child.data.tags["ragexp.vs_best.hit_rate_at_5"] == "best"
        assert diff == (set() if leader else {"vs_best/per_query.html", "vs_best/per_query.json"})
    view = json.loads(json.loads(client.get_experiment(experiment.experiment_id).tags[experiments.VIEW_TAG])["state"])
    assert "params.`chunking`" in view["selectedColumns"] and view["orderByAsc"] is False
    # what decides, first: each child's standing, value and CI half-width on hit rate@5, three decimals
    assert view["selectedColumns"][0] == f"tags.`{experiments.DECISION_TAG}`"
    for child in children:
        tags, metrics = child.data.tags, child.data.metrics
        half = (metrics["ci/hit_rate_at_5_high"] - metrics["ci/hit_rate_at_5_low"]) / 2
        assert tags[experiments.DECISION_TAG] == (f"{tags['ragexp.vs_best.hit_rate_at_5']} · "
                                                  f"{metrics['1_headline/hit_rate_at_5']:.3f} ± {half:.3f}")
    tied = sum(c.data.tags["ragexp.vs_best.hit_rate_at_5"] in ("best", "tied") for c in children)
    assert parent.data.tags[experiments.DECISION_TAG] == f"sweep · {tied}/{len(children)} best or tied · heatmaps"


def test_reproduce_from_a_copied_store_folder(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    first, copy, elsewhere = tmp_path / "first", tmp_path / "copy", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    ragexp(first, "run", *data_args(corpus, evalset, Path("mlflow.db")), "retrieval=bm25")  # sqlite:///mlflow.db, relative
    client = MlflowClient(f"sqlite:///{first / 'mlflow.db'}")
    [experiment] = [e for e in client.search_experiments() if e.name != "Default"]
    [original] = runs_of(client, experiment.experiment_id, "job")
    shutil.copytree(first, copy)
    shutil.rmtree(first)  # the store's recorded (absolute) artifact paths now point nowhere
    uri = f"sqlite:///{copy / 'mlflow.db'}"

    proc = ragexp(elsewhere, "reproduce", original.info.run_id, "--tracking-uri", uri)
    assert "retrieval metrics identical" in proc.stdout
    copied = MlflowClient(uri)
    [reproduction] = [r for r in runs_of(copied, experiment.experiment_id, "job") if r.info.run_id != original.info.run_id]
    assert reproduction.info.run_name == f"repro: {original.info.run_name}"
    assert reproduction.data.tags[store.TAG_REPRODUCES] == original.info.run_id
    assert experiments.run_link(experiment.experiment_id, original.info.run_id) in reproduction.data.tags[store.DESCRIPTION_TAG]

    moved = tmp_path / "artifacts-moved"
    shutil.move(copy / "mlruns", moved)  # no longer beside the sqlite file either
    proc = ragexp(elsewhere, "reproduce", original.info.run_id, "--tracking-uri", uri, "--no-log", check=False)
    assert proc.returncode == 2 and uri in proc.stderr and "--artifacts DIR" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = ragexp(elsewhere, "reproduce", original.info.run_id, "--tracking-uri", uri, "--no-log", "--artifacts", str(moved))
    assert "retrieval metrics identical" in proc.stdout

    missing = ragexp(elsewhere, "reproduce", "0" * 32, "--tracking-uri", uri, check=False)
    assert missing.returncode == 2 and f"no run with id {'0' * 32!r} in the tracking store {uri}" in missing.stderr
