"""``ragexp compare`` ranks only what is comparable: one eval set, and chunk-level metrics only
when they mean the same across the runs' chunkings."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from ragexp.cli import main
from ragexp.tracking import store
from ragexp.tracking.metric_names import split_for_mlflow


@pytest.fixture()
def tracking(tmp_path, monkeypatch) -> tuple[MlflowClient, str]:
    monkeypatch.chdir(tmp_path)  # a sqlite store's default artifact root is ./mlruns: not in the repo
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return store.connect(uri), uri  # a copy of the migrated schema, as ragexp creates a store: no migration per test


def log_run(client: MlflowClient, experiment: str, name: str, aggregates: dict, *, evalset=("tiny", "a" * 64),
            gold="span", chunking="fixed-512c-64", reproduces: str | None = None) -> str:
    """A job run as ragexp's run logger writes it: tags, the chunking label param, metrics under
    their MLflow keys (the same mapping the logger uses)."""
    experiment_id = store.ensure_experiment(client, experiment)
    tags = {store.TAG_KIND: "job", store.TAG_EVALSET_NAME: evalset[0], store.TAG_EVALSET_FP: evalset[1],
            store.TAG_GOLD_LEVEL: gold}
    if reproduces:
        tags[store.TAG_REPRODUCES] = reproduces
    run_id = client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    metrics, constants = split_for_mlflow(aggregates, {})
    store.log_batched(client, run_id, params={"chunking": chunking, **constants}, metrics=metrics)
    client.set_terminated(run_id)
    return run_id


def compare(capsys, uri: str, *args: str) -> tuple[int, str, str]:
    code = main(["compare", "--tracking-uri", uri, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


SCORES = {"hit_rate_at_5": 0.8, "recall_at_5": 0.7, "context_precision_at_5": 0.2, "ndcg_at_5": 0.6, "mrr": 0.5,
          "doc_hit_rate_at_5": 0.9, "n_queries": 10.0}


def test_runs_of_two_eval_sets_are_refused_naming_both(tracking, capsys):
    client, uri = tracking
    log_run(client, "mixed", "a1", SCORES)
    log_run(client, "mixed", "a2", {**SCORES, "hit_rate_at_5": 0.9})
    log_run(client, "mixed", "b1", {**SCORES, "hit_rate_at_5": 0.95}, evalset=("tiny-v2", "b" * 64))
    code, out, err = compare(capsys, uri, "--experiment", "mixed")
    assert code == 2 and out == ""
    assert "2 different eval sets" in err and "tiny aaaaaaaa: 2 runs" in err and "tiny-v2 bbbbbbbb: 1 runs" in err

    code, out, err = compare(capsys, uri, "--experiment", "mixed", "--force")
    assert code == 0 and err.startswith("WARNING: runs of 2 different eval sets")
    assert "0.9500" in out and "*" not in out  # listed, never ranked across eval sets


def test_one_eval_set_is_ranked(tracking, capsys):
    client, uri = tracking
    log_run(client, "one", "a1", SCORES)
    log_run(client, "one", "a2", {**SCORES, "hit_rate_at_5": 0.9})
    code, out, err = compare(capsys, uri, "--experiment", "one", "--sort", "hit_rate_at_5")
    assert code == 0 and err == ""
    header, _, best, other = out.splitlines()[:4]
    assert header.split() == ["run", "hit_rate_at_5", "recall_at_5", "context_precision_at_5", "ndcg_at_5", "mrr"]
    assert best.startswith("a2 [") and "0.9000*" in best and "0.8000 " in other


def test_chunk_level_best_is_not_marked_across_chunkings_when_gold_is_documents(tracking, capsys):
    client, uri = tracking
    log_run(client, "docs", "fixed", SCORES, gold="document", chunking="fixed-512c-64")
    log_run(client, "docs", "whole", {**SCORES, "hit_rate_at_5": 0.9, "doc_hit_rate_at_5": 0.95}, gold="document",
            chunking="none")
    code, out, _ = compare(capsys, uri, "--experiment", "docs", "--metrics", "hit_rate_at_5,doc_hit_rate_at_5")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["run", "hit_rate_at_5†", "doc_hit_rate_at_5"]
    assert "0.9000*" not in out and "0.9500*" in out  # the document-level column is still ranked
    assert "not comparable across chunkings" in out

    # same chunking: chunk-level values are comparable again
    log_run(client, "docs-same", "a", SCORES, gold="document")
    log_run(client, "docs-same", "b", {**SCORES, "hit_rate_at_5": 0.9}, gold="document")
    code, out, _ = compare(capsys, uri, "--experiment", "docs-same", "--metrics", "hit_rate_at_5")
    assert "0.9000*" in out and "†" not in out


def test_a_misspelt_metric_is_an_error_with_a_suggestion(tracking, capsys):
    client, uri = tracking
    log_run(client, "typo", "a1", SCORES)
    code, out, err = compare(capsys, uri, "--experiment", "typo", "--sort", "hit_rat_at_5")
    assert code == 2 and out == ""
    assert err.startswith("ragexp compare: error: field '--sort': no metric 'hit_rat_at_5' in these runs; "
                          "did you mean hit_rate_at_5") and len(err.strip().splitlines()) == 1
    code, _, err = compare(capsys, uri, "--experiment", "typo", "--metrics", "mrr,ndcg_at_50")
    assert code == 2 and "'ndcg_at_50'" in err and "--metrics" in err


def test_a_reproduction_is_labelled_with_its_original(tracking, capsys):
    client, uri = tracking
    original = log_run(client, "repro", "fixed-512c-64 · bm25", SCORES)
    log_run(client, "repro", "repro: fixed-512c-64 · bm25", SCORES, reproduces=original)
    code, out, _ = compare(capsys, uri, "--experiment", "repro")
    assert code == 0
    assert "repro: fixed-512c-64 · bm25 [" in out and f"repro of {original[:8]}]" in out


def test_sweep_summary_says_when_its_chunk_level_best_is_not_comparable(tracking):
    """The parent's best tags and description carry the same caveat as ``compare``'s ``†``."""
    from ragexp.tracking.sweep_summary import log_sweep_summary

    client, _ = tracking
    experiment_id = store.ensure_experiment(client, "docs-sweep")
    parent = client.create_run(experiment_id, run_name="sweep", tags={store.TAG_KIND: "sweep"}).info.run_id
    for chunking, hit_rate in (("fixed", 0.7), ("none", 0.9)):
        run_id = log_run(client, "docs-sweep", chunking, {**SCORES, "hit_rate_at_5": hit_rate}, gold="document",
                         chunking=chunking)
        client.set_tag(run_id, store.PARENT_TAG, parent)
        client.set_tag(run_id, "axis.chunking", chunking)
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{store.TAG_KIND}` = 'job'")
    log_sweep_summary(client, parent, experiment_id, runs, ["chunking"])
    tags = client.get_run(parent).data.tags
    [whole] = [run.info.run_id for run in runs if run.info.run_name == "none"]
    assert tags["best.hit_rate_at_5"] == f"none = 0.9000 (run {whole[:8]}) (not comparable across chunkings)"
    assert "Gold is whole documents" in tags[store.DESCRIPTION_TAG]
