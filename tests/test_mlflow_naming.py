"""What MLflow shows, decided before any server: metric keys, run names, axis tags, params."""

from __future__ import annotations

import pytest
from mlflow.utils.validation import _validate_metric_name, _validate_param_name

from ragexp.metrics.evaluate import metric_names
from ragexp.tracking import run_names
from ragexp.tracking.metric_names import (
    CONSTANTS,
    HEADLINE,
    from_mlflow,
    results_view,
    split_for_mlflow,
    to_mlflow,
)

KS = [1, 3, 5, 10]


def results_keys() -> list[str]:
    """Every kind of key a run's aggregates hold (from the metric registry, not from the mapping)."""
    chunk = metric_names(KS)
    keys = [*chunk, *metric_names(KS, doc=True), "context_hit_rate", "context_recall", "context_precision"]
    keys += [f"tag.{tag}.{m}" for tag in ("synonym", "multi-chunk") for m in chunk]
    keys += [f"{m}_ci_{bound}" for m in ("hit_rate_at_5", "mrr", "ndcg_at_10") for bound in ("low", "high")]
    keys += ["faithfulness", "answer_relevance", "f1", "retrieval_failure_rate", "n_retrieval_failure", "judge_failures",
             "gen.prompt_tokens", "answer_relevance_judge_failures", "tag.synonym.faithfulness"]
    return keys


def test_every_key_round_trips_and_is_a_valid_mlflow_name():
    keys = results_keys()
    mlflow_keys = [to_mlflow(key) for key in keys]
    assert len(set(mlflow_keys)) == len(keys)
    for key, logged in zip(keys, mlflow_keys):
        _validate_metric_name(logged)
        assert from_mlflow(logged) == key
    assert from_mlflow("some_hand_logged_metric") == "some_hand_logged_metric"


def test_headline_section_comes_first_in_every_mlflow_ordering():
    """The chart view sorts sections by code units (new sections by locale order), the compare
    page and column pickers list keys alphabetically: ``1_headline`` is first in all of them."""
    mlflow_keys = [to_mlflow(key) for key in results_keys()]
    sections = {key.rsplit("/", 1)[0] for key in mlflow_keys}
    for order in (sorted(sections), sorted(sections, key=str.casefold)):
        assert order[0] == "1_headline", order
    first = sorted(mlflow_keys)[: sum(key in HEADLINE for key in results_keys())]
    assert {from_mlflow(key) for key in first} == {key for key in results_keys() if key in HEADLINE}
    assert to_mlflow("hit_rate_at_5") == "1_headline/hit_rate_at_5" and to_mlflow("hit_rate_at_3") == "retrieval/hit_rate_at_3"
    assert to_mlflow("doc_ndcg_at_10") == "doc/ndcg_at_10" and to_mlflow("tag.synonym.mrr") == "tag/synonym/mrr"
    assert to_mlflow("hit_rate_at_5_ci_low") == "ci/hit_rate_at_5_low"


def test_constants_are_params_and_read_back():
    aggregates = {"hit_rate_at_5": 0.8, "mrr": 0.5, "n_queries": 148.0, "n_chunks": 412.0, "context_k": 5.0}
    metrics, params = split_for_mlflow(aggregates, {"retrieval_s": 1.5})
    assert params == {"n_queries": "148", "n_chunks": "412", "context_k": "5"}
    assert list(metrics) == ["1_headline/hit_rate_at_5", "1_headline/mrr", "time/retrieval_s"]  # headline logged first
    assert not set(CONSTANTS) & {from_mlflow(key) for key in metrics}
    assert results_view(metrics, params) == {**aggregates, "time.retrieval_s": 1.5}


def test_sweep_axes_are_what_the_sweep_varies_whatever_the_key():
    task = ["dataset=evalset", "chunking=fixed,recursive,markdown", "retrieval=bm25,dense", "chunking.overlap=20",
            "retrieval.k1=0.9,1.2", "retrieval/tokenizer=english,plain", "eval.ks=[1,3,5],[5,10]", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2", "reranker=none,"]
    assert run_names.sweep_axes(task) == ["chunking", "retrieval", "retrieval.k1", "retrieval/tokenizer", "eval.ks"]
    # an experiment preset's sweeper params count too (the demo sweep), before the command line's
    preset = {"chunking": "fixed,recursive", "reranker": "none,embedding"}
    assert run_names.sweep_axes(["retrieval=bm25,dense"], preset) == ["chunking", "reranker", "retrieval"]


def test_run_name_shows_every_axis_value_and_nothing_constant():
    axes = ["chunking", "retrieval", "reranker", "retrieval.k1", "retrieval/tokenizer", "eval.ks", "generator"]
    job = ["dataset=demo", "chunking=markdown", "retrieval=hybrid_rrf", "reranker=none", "retrieval.k1=1.2",
           "retrieval/tokenizer=plain", "eval.ks=[1,3,5]", "generator=local", "tracking.uri=sqlite:///x.db"]
    values = run_names.axis_values(job, axes)
    assert values == {"chunking": "markdown", "retrieval": "hybrid_rrf", "reranker": "none", "retrieval.k1": "1.2",
                      "retrieval/tokenizer": "plain", "eval.ks": "1,3,5", "generator": "local"}
    name = run_names.run_name({}, "markdown-1024", values)
    assert name == "markdown-1024 · hybrid_rrf · rerank=none · k1=1.2 · tokenizer=plain · ks=1,3,5 · generator=local"
    assert run_names.axis_tags({"chunking": "markdown"}) == {"axis.chunking": "markdown"}
    # chunking and chunking.size read as one label
    assert run_names.run_name({}, "fixed-256c-64", {"chunking": "fixed", "chunking.size": "256", "retrieval": "bm25"}) == \
        "fixed-256c-64 · bm25"


CONFIG = {
    "dataset": {"loader": "demo", "name": "demo"},
    "chunking": {"name": "fixed", "unit": "chars", "size": 512, "overlap": 64, "tokenizer": None, "separators": None},
    "embedding": {"name": "minilm", "model": "minilm", "batch_size": 64},
    "retrieval": {"name": "hybrid_rrf", "_target_": "reference_pipelines.hybrid.HybridRetriever", "components": ["bm25", "dense"],
                  "encoder": {"name": "minilm", "model": "minilm", "batch_size": 64}, "stemmer": None},
    "reranker": {"name": "none"},
    "generator": {"name": "none"},
    "judge": {"name": "lexical", "_target_": "ragexp.judging.judges.LexicalJudge"},
    "eval": {"ks": [1, 3, 5, 10], "sample": None, "retrievers": [{"k1": 1.5}, {"index": "flat"}]},
}


def test_params_are_what_the_variant_uses_with_one_label_per_component():
    params = run_names.run_params(CONFIG, "fixed-512c-64")
    for key, value in params.items():
        _validate_param_name(key)
        assert value not in ("None", "null") and not value.startswith("["), (key, value)
    assert params["eval.ks"] == "1,3,5,10" and params["retrieval.components"] == "bm25,dense"
    assert params["eval.retrievers.0.k1"] == "1.5" and params["eval.retrievers.1.index"] == "flat"
    assert "chunking.tokenizer" not in params and "eval.sample" not in params and "retrieval.stemmer" not in params
    assert not any(key.startswith(("embedding.", "judge.")) for key in params)  # embedded in retrieval; no generator
    assert {k: params[k] for k in ("chunking", "retrieval", "reranker", "generator", "embedding")} == {
        "chunking": "fixed-512c-64", "retrieval": "hybrid_rrf", "reranker": "none", "generator": "none", "embedding": "minilm"}
    assert "judge" not in params


def test_bm25_run_has_no_embedding_label_and_a_generator_brings_its_judge():
    bm25 = {**CONFIG, "retrieval": {"name": "bm25", "_target_": "reference_pipelines.bm25.BM25Retriever", "k1": 1.5}}
    assert "embedding" not in run_names.run_params(bm25, "fixed-512c-64")
    generating = {**bm25, "generator": {"name": "local", "_target_": "reference_pipelines.generators.llm.LLMGenerator"}}
    params = run_names.run_params(generating, "fixed-512c-64")
    assert params["judge"] == "lexical" and params["judge._target_"] == "ragexp.judging.judges.LexicalJudge"


@pytest.mark.parametrize("original", ["markdown-1024 · hybrid_rrf", "fixed-512c-64 · bm25 · rerank=none"])
def test_a_reproduction_is_named_as_such(original):
    assert run_names.reproduction_name(original) == f"repro: {original}" != original
