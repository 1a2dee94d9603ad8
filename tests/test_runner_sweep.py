"""The runner end to end through the real CLI: sweeps, MLflow contents, reproduce, parallel safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragexp.tracking import store
from ragexp.tracking.metric_names import results_view
from tests.helpers.cli import dataset_args, job_runs, ragexp

pytestmark = pytest.mark.slow


def test_two_by_two_sweep_logs_parent_children_artifacts_and_metrics(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "chunking=fixed,recursive", "retrieval=bm25,dense",
           "chunking.size=120", "chunking.overlap=20", "eval.ks=[1,3,5]")
    client, parents, children = job_runs(db)
    assert len(parents) == 1 and len(children) == 4
    assert parents[0].info.status == "FINISHED"
    assert {c.data.tags[store.PARENT_TAG] for c in children} == {parents[0].info.run_id}
    names = {c.info.run_name for c in children}
    assert names == {"fixed-120c-20 · bm25", "fixed-120c-20 · dense", "recursive-120-20 · bm25", "recursive-120-20 · dense"}
    expected = {f"{m}_at_{k}" for m in ("recall", "hit_rate", "context_precision", "ndcg", "mrr") for k in (1, 3, 5)}
    expected |= {"mrr", "doc_ndcg_at_5", "doc_hit_rate_at_1", "n_queries", "n_queries_no_gold", "tag.synonym.hit_rate_at_5"}
    for child in children:
        assert child.info.status == "FINISHED"
        aggregates = results_view(child.data.metrics, child.data.params)  # MLflow keys mapped back to results keys
        assert expected <= set(aggregates), expected - set(aggregates)
        assert aggregates["n_queries_no_gold"] == 1.0  # the unanswerable item is reported, not dropped
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config", "ragexp_results.json", store.PER_QUERY_TABLE, "plots"} <= artifacts
        config_files = {a.path for a in client.list_artifacts(child.info.run_id, "config")}
        assert config_files == {store.CONFIG_ARTIFACT, store.OVERRIDES_ARTIFACT}
        assert child.data.params["chunking.name"] in {"fixed", "recursive"}
        assert child.data.tags[store.TAG_EVALSET_FP] and child.data.tags[store.TAG_CORPUS_FP]
        assert len(child.inputs.dataset_inputs) == 1
    # Re-launching the same sweep resumes: nothing new is computed or logged.
    ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "chunking=fixed,recursive", "retrieval=bm25,dense",
           "chunking.size=120", "chunking.overlap=20", "eval.ks=[1,3,5]")
    _, parents_after, children_after = job_runs(db)
    assert len(children_after) == 4 and len(parents_after) == 2
    check_compare_tables(tmp_path, db, children)


def check_compare_tables(cwd: Path, db: Path, children) -> None:
    """``ragexp compare`` (the demo's last step) lists every job with the headline metrics, best marked."""
    table = ragexp(cwd, "compare", "--experiment", "tiny", "--tracking-uri", f"sqlite:///{db}",
                   "--sort", "hit_rate_at_5").stdout
    header = table.splitlines()[0].split()
    assert header == ["run", "hit_rate_at_5", "recall_at_5", "context_precision_at_5", "ndcg_at_5", "mrr",
                      "index", "MB", "peak", "RSS", "MB"]  # the cost every run measures (docs/cost.md)
    assert all(f"[{c.info.run_id[:8]}]" in table for c in children) and "*" in table
    best = max(results_view(c.data.metrics, c.data.params)["hit_rate_at_5"] for c in children)
    assert f"{best:.4f}*" in table.splitlines()[2]  # sorted: the best hit rate comes first
    by_tag = ragexp(cwd, "compare", "--experiment", "tiny", "--tracking-uri", f"sqlite:///{db}",
                    "--by-tag", "hit_rate_at_5").stdout
    assert by_tag.startswith("hit_rate_at_5 per tag") and "synonym" in by_tag.splitlines()[1]


def test_reproduce_gives_identical_retrieval_metrics(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", *dataset_args(tiny_dataset, db), "retrieval=hybrid_rrf", "chunking=markdown")
    _, _, children = job_runs(db)
    assert len(children) == 1
    proc = ragexp(tmp_path, "reproduce", children[0].info.run_id, "--tracking-uri", f"sqlite:///{db}")
    assert "retrieval metrics identical" in proc.stdout


def test_parallel_joblib_sweep_on_fresh_sqlite_store_loses_no_run(tiny_dataset, tmp_path):
    for trial in range(2):
        db = tmp_path / f"fresh-{trial}.db"
        ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "hydra/launcher=joblib", "hydra.launcher.n_jobs=4",
               "retrieval=bm25", "chunking=fixed,recursive,sentence,none", f"cache_dir={tmp_path}/cache")
        _, parents, children = job_runs(db)
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        assert len(children) == 4, f"trial {trial}: {len(children)} of 4 runs logged"
        assert all(c.info.status == "FINISHED" for c in children)


def test_unknown_group_option_lists_valid_ones(tmp_path):
    proc = ragexp(tmp_path, "run", "retrieval=bm52", check=False)
    assert proc.returncode == 2
    assert "bm25" in proc.stderr and "hybrid_rrf" in proc.stderr


def test_unreachable_tracking_server_fails_fast_naming_uri(tiny_dataset, tmp_path):
    args = dataset_args(tiny_dataset, tmp_path / "x.db")
    args[-3] = "tracking.uri=http://127.0.0.1:9"
    proc = ragexp(tmp_path, "run", *args, "tracking.connect_timeout_s=2", check=False)
    assert proc.returncode == 2
    assert "http://127.0.0.1:9" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_k_fails_at_start_with_key_path(tiny_dataset, tmp_path):
    proc = ragexp(tmp_path, "run", *dataset_args(tiny_dataset, tmp_path / "x.db"), "eval.ks=[0,5]", check=False)
    assert proc.returncode == 2 and "eval.ks" in proc.stderr
    assert not (tmp_path / "x.db").exists() or not job_runs(tmp_path / "x.db")[2]


def test_hybrid_knobs_sweep_from_the_shell_as_written(tiny_dataset, tmp_path):
    """retrieval.k1 and retrieval/tokenizer reach a hybrid's BM25 (they have one home: bm25.yaml)."""
    db = tmp_path / "mlflow.db"
    ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "retrieval=hybrid_rrf", "retrieval.k1=0.9,1.2",
           "retrieval/tokenizer=english,plain", "chunking=recursive", "chunking.size=120", "chunking.overlap=20")
    client, parents, children = job_runs(db)
    assert len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    assert sorted((c.data.params["retrieval.k1"], c.data.params["retrieval.tokenizer.name"]) for c in children) == [
        ("0.9", "english"), ("0.9", "plain"), ("1.2", "english"), ("1.2", "plain")]
    stemmer = {c.data.params["retrieval.tokenizer.name"]: c.data.params.get("retrieval.tokenizer.stemmer") for c in children}
    assert stemmer["english"] == "snowball-english" and stemmer["plain"] != "snowball-english"


def test_chunking_none_in_a_size_sweep_runs_once(tiny_dataset, tmp_path):
    db = tmp_path / "mlflow.db"
    proc = ragexp(tmp_path, "run", "-m", *dataset_args(tiny_dataset, db), "retrieval=bm25", "chunking=none,fixed",
                  "chunking.size=120,240", "chunking.overlap=0")
    client, parents, children = job_runs(db)
    names = sorted(c.data.params["chunking.name"] for c in children)
    assert names == ["fixed", "fixed", "none"] and all(c.info.status == "FINISHED" for c in children)
    assert "has no size: ignoring chunking.size=240" in proc.stderr + proc.stdout
    assert parents[0].info.status == "FINISHED"


def test_reproduce_of_an_int8_run_after_another_run_filled_the_cache_is_identical(tmp_path):
    """The second run reads the queries and the chunks both chunkings share from the text-vector
    cache and encodes the rest in its own batches; its reproduction (fresh cache) encodes them all
    together. While int8 vectors depended on their batch, 152 of its retrieval metrics differed (issue #34)."""
    db, cache = tmp_path / "mlflow.db", tmp_path / "cache"
    common = ["dataset=demo", f"tracking.uri=sqlite:///{db}", "tracking.experiment=tiny", "progress=false",
              "retrieval=dense", "embedding.precision=int8", f"cache_dir={cache}", "chunking=recursive"]
    ragexp(tmp_path, "run", *common, "chunking.overlap=0")
    ragexp(tmp_path, "run", *common, "chunking.overlap=64")
    _, _, children = job_runs(db)
    [second] = [c for c in children if c.data.params["chunking.overlap"] == "64"]
    proc = ragexp(tmp_path, "reproduce", second.info.run_id, "--tracking-uri", f"sqlite:///{db}", "--no-log")
    assert "retrieval metrics identical" in proc.stdout
