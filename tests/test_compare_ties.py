"""``ragexp compare`` marks the runs tied with the best (≈), prints the noise line, and
``--per-query`` lists the queries two runs split on and logs the list to both runs."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from ragexp.cli import main
from ragexp.comparison import vs_best
from ragexp.evaluation.results import ARTIFACT_NAME, QueryResult, RunResults
from ragexp.tracking import store
from ragexp.tracking.metric_names import split_for_mlflow

BEST = [1] * 13 + [0]
RUNS = {  # 14 queries; "eight" misses 8 of best's hits (p = 2/2**8 < 0.05/2), "six" 6 (p = 2/2**6 > 0.05/2)
    "best": BEST,
    "eight": [0] * 8 + BEST[8:],
    "six": [0] * 6 + BEST[6:],
}


def results_for(hits: list[int], moved: int | None = None) -> RunResults:
    """Gold ``g`` at rank 1 on a hit (rank 3 for query ``moved``), absent on a miss."""
    rows = []
    for i, hit in enumerate(hits):
        rank = 3 if i == moved else 1
        ranking = [[f"x{j}", 10.0 - j] for j in range(1, 5)]
        if hit:
            ranking.insert(rank - 1, ["g", 10.0 - rank + 0.5])
        rows.append({"query_id": f"q{i:02d}", "query": f"question {i}", "tags": ["t"] if i % 2 else [],
                     "ranking": sorted(ranking, key=lambda r: -r[1]), "relevant": {"g": 1},
                     "metrics": {"hit_rate_at_5": float(hit), "mrr": (1 / rank) if hit else 0.0}})
    return RunResults(meta={"ks": [5], "context_k": 5, "evalset_fingerprint": "f" * 64}, aggregates={},
                      per_query=[QueryResult.from_dict(row) for row in rows])


def log_run(client: MlflowClient, experiment_id: str, name: str, results: RunResults, tmp_path) -> str:
    tags = {store.TAG_KIND: "job", store.TAG_EVALSET_NAME: "tiny", store.TAG_EVALSET_FP: "f" * 64,
            store.TAG_GOLD_LEVEL: "span"}
    run_id = client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    rows = results.per_query
    aggregates = {m: sum(r.metrics[m] for r in rows) / len(rows) for m in ("hit_rate_at_5", "mrr")}
    metrics, constants = split_for_mlflow({**aggregates, "n_queries": float(len(rows))}, {})
    store.log_batched(client, run_id, params={"chunking": "fixed", **constants}, metrics=metrics)
    client.log_artifact(run_id, str(results.save(tmp_path / name / ARTIFACT_NAME)))
    client.set_terminated(run_id)
    return run_id


@pytest.fixture()
def logged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a bare sqlite store puts artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = store.ensure_experiment(client, "ties")
    ids = {name: log_run(client, experiment_id, name, results_for(hits, moved=12 if name == "six" else None), tmp_path)
           for name, hits in RUNS.items()}
    return client, uri, ids


def test_compare_marks_runs_tied_with_the_best_and_prints_the_noise_line(logged, capsys):
    _, uri, ids = logged
    assert main(["compare", "--tracking-uri", uri, "--experiment", "ties", "--metrics", "hit_rate_at_5"]) == 0
    out = capsys.readouterr().out
    cells = {line.split()[0]: line.split()[-1] for line in out.splitlines()[2:5]}
    assert cells == {"best": f"{13 / 14:.4f}*", "eight": f"{5 / 14:.4f}", "six": f"{7 / 14:.4f}≈"}
    assert "Bonferroni over the other 2 runs" in out
    assert vs_best.noise_line(14, 13 / 14, "hit rate@5") in out


def test_per_query_lists_the_split_queries_in_the_terminal_and_logs_them_to_both_runs(logged, capsys, tmp_path):
    client, uri, ids = logged
    assert main(["compare", "--tracking-uri", uri, "--per-query", ids["best"], ids["six"]]) == 0
    out = capsys.readouterr().out
    # by hand: q00..q05 hit in best, missed in six; q12 hit in both, rank 1 -> 3
    assert "14 paired queries at k=5: 6 A hits, B misses, 0 B hits, A misses, 1 rank moved" in out
    assert all(f"  q{i:02d}  1 -> -  ok / retrieval_failure" in out for i in range(6))
    assert "  q12  1 -> 3  ok / ok  [] " in out
    assert "paired sign-flip p = 0.0312" in out and "at n=14 a hit-rate@5 difference below" in out
    for run, other in ((ids["best"], ids["six"]), (ids["six"], ids["best"])):
        paths = {a.path for a in client.list_artifacts(run, "per_query_diff")}
        assert paths == {f"per_query_diff/{other}.html", f"per_query_diff/{other}.json"}
    logged_json = json.loads(open(client.download_artifacts(ids["six"], f"per_query_diff/{ids['best']}.json",
                                                            str(tmp_path))).read())
    assert [q["query_id"] for q in logged_json["queries"]] == [f"q{i:02d}" for i in range(6)] + ["q12"]


def test_per_query_needs_exactly_two_runs(logged, capsys):
    _, uri, ids = logged
    assert main(["compare", "--tracking-uri", uri, "--per-query", ids["best"]]) == 2
    assert "--per-query compares exactly two runs, got 1" in capsys.readouterr().err
