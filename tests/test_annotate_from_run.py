"""``ragexp evalset annotate --from-run RUN_ID [--failures]`` on a real logged run: what it queues is
read from the run's artifacts in MLflow and is exactly the unjudged top-k units (or the failures)."""

from __future__ import annotations

import json

import pytest

from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
from ragexp.metrics.ranking import trec_order
from ragexp.tracking import store
from tests.helpers.cli import dataset_args, job_runs, ragexp

pytestmark = pytest.mark.slow


def queued(sidecar) -> dict[str, dict]:
    entries = json.loads(sidecar.read_text())["entries"]
    return {e["id"]: e for e in entries if e.get("review")}


def test_from_run_queues_the_runs_unjudged_units_and_failures(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", *dataset_args(tiny_dataset, db), "retrieval=bm25", "chunking=fixed", "chunking.size=80",
           "chunking.overlap=0", "generator=extractive", "eval.context_k=3")
    _, _, children = job_runs(db)
    run_id = children[0].info.run_id
    results = RunResults.load(store.download_artifact(run_id, ARTIFACT_NAME, f"sqlite:///{db}"))
    per_query = [row.to_dict() for row in results.per_query]
    uri = ["--tracking-uri", f"sqlite:///{db}"]

    out = ragexp(tmp_path, "evalset", "annotate", str(evalset), "--corpus", str(corpus), "--from-run", run_id,
                 "--depth", "5", "--queue-only", *uri)
    expected = {}
    for row in per_query:
        units = [u for u, _ in trec_order([tuple(p) for p in row["ranking"]])[:5] if u not in row["relevant"]]
        if units:
            expected[row["query_id"]] = units
    got = queued(evalset.with_name("evalset.annotation.json"))
    assert {qid: [u["unit_id"] for u in e["review"]["units"]] for qid, e in got.items()} == expected
    assert f"queued {sum(map(len, expected.values()))} unjudged top-5 units on {len(expected)} questions (0 new)" in out.stdout
    assert all(e["review"]["reason"] == f"unjudged in the top 5 of run {results.meta.get('run_id') or results.meta['run_name']}"
               for e in got.values())
    judged_5 = results.aggregates["judged_at_5"]  # the run logged the same share
    shares = [1 - len(expected.get(r["query_id"], [])) / min(5, len(r["ranking"])) for r in per_query if r["ranking"]]
    assert judged_5 == pytest.approx(sum(shares) / len(shares))

    sidecar = evalset.with_name("evalset.annotation.json")
    sidecar.unlink()
    out = ragexp(tmp_path, "evalset", "annotate", str(evalset), "--corpus", str(corpus), "--from-run", run_id,
                 "--failures", "--queue-only", *uri)
    failures = {r["query_id"]: r["failure_class"] for r in per_query
                if r.get("failure_class") in ("retrieval_failure", "hallucinated")}
    assert failures, "the tiny run should fail somewhere (t7 is unanswerable; the extractive generator rarely refuses)"
    got = queued(sidecar)
    assert {qid: e["review"]["reason"] for qid, e in got.items()} == failures
    for qid, e in got.items():
        row = next(r for r in per_query if r["query_id"] == qid)
        assert [u["unit_id"] for u in e["review"]["units"]] == [u for u, _ in trec_order([tuple(p) for p in row["ranking"]])[:3]]
    assert "(0 new)" in out.stdout  # the run's questions are all in the eval set: reopened, not re-added
