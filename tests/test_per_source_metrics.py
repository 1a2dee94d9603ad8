"""Metrics per item source (log, hand, draft, failure): drafted and real questions never averaged unseen."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from ragexp.datamodel import EvalItem
from ragexp.evaluation.results import RunResults
from ragexp.evaluation.runner import source_warnings
from ragexp.metrics.per_tag import per_source_means
from ragexp.tracking.metric_names import from_mlflow, results_view, to_mlflow
from tests.helpers.cli import dataset_args, job_runs, ragexp


def test_per_source_means_by_hand():
    items = [EvalItem("a", "q", source="log"), EvalItem("b", "q", source="log"), EvalItem("c", "q", source="draft"),
             EvalItem("d", "q")]  # fmt: skip
    per_query = {"a": {"mrr": 1.0}, "b": {"mrr": 0.5}, "c": {"mrr": 0.0}, "d": {"mrr": 0.25}}
    assert per_source_means(per_query, items) == {"source.log.mrr": 0.75, "source.draft.mrr": 0.0, "source.unrecorded.mrr": 0.25}


def test_an_eval_set_without_sources_gets_no_per_source_metrics():
    assert per_source_means({"a": {"mrr": 1.0}}, [EvalItem("a", "q")]) == {}


def test_mixing_drafts_with_other_items_warns_and_only_then():
    def items(*sources):
        return [EvalItem(str(i), "q", source=s) for i, s in enumerate(sources)]

    assert source_warnings(items("log", "hand")) == []
    assert source_warnings(items("draft", "draft")) == []
    (warning,) = source_warnings(items("draft", "log", "log", None))
    assert "mixes drafted and other questions (1 draft, 2 log, 1 unrecorded)" in warning


def test_source_keys_round_trip_through_mlflow_names():
    assert to_mlflow("source.draft.hit_rate_at_5") == "source/draft/hit_rate_at_5"
    assert from_mlflow("source/draft/hit_rate_at_5") == "source.draft.hit_rate_at_5"


@pytest.mark.slow
def test_a_run_logs_each_source_mean_and_compare_splits_and_notes_it(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    sources = {"t1": "log", "t2": "log", "t3": "draft", "t4": "draft", "t5": "hand", "t6": "hand", "t7": "log"}
    lines = [json.loads(line) for line in evalset.read_text(encoding="utf-8").splitlines()]
    evalset.write_text("\n".join(json.dumps({**obj, "source": sources[obj["id"]]} if "id" in obj else obj) for obj in lines) + "\n",
                       encoding="utf-8")
    db = tmp_path / "mlflow.db"
    proc = ragexp(tmp_path, "run", *dataset_args((corpus, evalset), db), "retrieval=bm25", "chunking=markdown")
    assert "WARNING: the eval set mixes drafted and other questions (2 draft, 2 hand, 3 log)" in proc.stdout
    client, _, (run,) = job_runs(db)
    results = RunResults.load(client.download_artifacts(run.info.run_id, "ragexp_results.json", str(tmp_path)))
    rows = {row.query_id: row.to_dict() for row in results.per_query}
    logged = results_view(run.data.metrics, run.data.params)
    for source in ("log", "draft", "hand"):
        ids = [qid for qid, s in sources.items() if s == source and rows[qid]["relevant"]]  # t7 has no gold
        expected = sum(rows[qid]["metrics"]["hit_rate_at_5"] for qid in ids) / len(ids)
        assert logged[f"source.{source}.hit_rate_at_5"] == pytest.approx(expected)
        assert all(rows[qid]["source"] == source for qid in ids)
    uri = f"sqlite:///{db}"
    by_source = ragexp(tmp_path, "compare", "--experiment", "tiny", "--tracking-uri", uri, "--by-source", "hit_rate_at_5")
    assert "hit_rate_at_5 per source" in by_source.stdout
    header = by_source.stdout.splitlines()[1]
    assert all(name in header for name in ("draft", "hand", "log"))
    table = ragexp(tmp_path, "compare", "--experiment", "tiny", "--tracking-uri", uri)
    assert "mixes drafted and other questions (draft, hand, log)" in table.stdout
    assert MlflowClient(uri).get_run(run.info.run_id).data.metrics["source/draft/mrr"] == pytest.approx(logged["source.draft.mrr"])
