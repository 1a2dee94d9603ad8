"""What a run costs (:mod:`ragexp.cost`): the pieces against independent truth, and whole runs on
the tiny dataset (BM25 and a fake OpenAI endpoint: no model is loaded here).

- the Pareto front and dominance against a brute-force definition on random points;
- the budget grammar for the family of well- and ill-formed limits, the gate's budgets and cost
  tolerances (a latency budget fails the config above it, the gate exit code 1);
- index bytes against what FAISS serialises and what the stage cache stores for BM25;
- the served-latency statistics against numpy over the recorded per-query medians, and the probe
  writing nothing to any cache;
- tokens and money against the usage the endpoint reported, the same from the model-call cache;
- peak RSS reset per job; key naming both ways; precision in run names; the noise line at a ceiling.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import faiss
import numpy as np
import pytest

from ragexp.commands import gate as gate_command
from ragexp.comparison import vs_best
from ragexp.comparison.gate import GateSpec, run_gate
from ragexp.comparison.table import cost_metrics, format_table
from ragexp.cost import budgets, keys, memory, pareto
from ragexp.cost.latency import TOTAL, LatencyReport
from ragexp.cost.settings import cost_settings
from ragexp.cost.tokens import token_costs
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job
from ragexp.llm.base import LLMResponse
from ragexp.llm.call_cache import CallCache, cached_call
from ragexp.llm.usage import TokenUsage, metered
from ragexp.metrics.measure import COST, measure
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.stage_clock import FUSION, QUERY_ENCODING, listening, stage
from ragexp.runtime.uncached import uncached
from ragexp.tracking.metric_names import from_mlflow, to_mlflow
from ragexp.tracking.run_names import run_name
from reference_pipelines.dense import faiss_index_bytes
from tests.helpers.configs import compose_run_config
from tests.helpers.fake_openai_server import FakeOpenAIServer, reported_usage


# --- Pareto front -------------------------------------------------------------------------------

def brute_force_front(points):
    """Definition: no other point is at least as good on both and better on one."""
    return {p.run_id for p in points
            if not any(q.quality >= p.quality and q.cost <= p.cost and (q.quality, q.cost) != (p.quality, p.cost)
                       for q in points)}


def test_front_and_dominance_match_the_definition_on_random_points():
    rng = random.Random(7)
    for _ in range(200):
        points = [pareto.Point(f"r{i}", rng.choice([0.5, 0.6, 0.7, rng.random()]), rng.choice([10.0, 20.0, rng.random() * 50]))
                  for i in range(rng.randint(1, 9))]
        front = {p.run_id for p in pareto.front(points)}
        assert front == brute_force_front(points)
        dominated = pareto.dominated_by(points)
        assert set(dominated) == {p.run_id for p in points} - front
        by_id = {p.run_id: p for p in points}
        for run, by in dominated.items():
            assert pareto.dominates(by_id[by], by_id[run])


def test_cheapest_tied_is_the_tie_set_member_with_the_lowest_cost():
    assert pareto.cheapest_tied(["best", "b", "c"], {"best": 50.0, "b": 12.0, "c": 30.0}) == "b"
    assert pareto.cheapest_tied(["best", "b"], {"best": 5.0, "b": 5.0}) == "best"  # equal: the best first
    assert pareto.cheapest_tied(["best", "b"], {"c": 1.0}) is None


# --- budgets and keys ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, metric, op, limit", [
    ("cost/latency_p95_ms <= 250", "cost.latency_p95_ms", "<=", 250.0),
    ("cost.index_bytes<=2e9", "cost.index_bytes", "<=", 2e9),
    ("  cost/endpoint_latency_p95_ms<=1.5e2 ", "cost.endpoint_latency_p95_ms", "<=", 150.0),
    ("hit_rate_at_5 >= 0.8", "hit_rate_at_5", ">=", 0.8),
])
def test_budget_grammar_accepts(text, metric, op, limit):
    budget = budgets.parse_budget(text)
    assert (budget.metric, budget.op, budget.limit) == (metric, op, limit)


@pytest.mark.parametrize("text", [
    "cost/latency_p95_ms < 250", "cost/latency_p95_ms == 250", "cost/latency_p95_ms <= ", "<= 250",
    "cost/latency_p95_ms <= nan", "cost/latency_p95_ms <= inf", "cost/latency_p95_ms <= 1e999",
    "cost/latency_p95_ms <= 250; rm -rf /", "cost/latency p95 <= 250", "cost/latency_p95_ms <= 0x10",
    "", "a" * 300 + " <= 1", "cost/latency_p95_ms <= 2.5.0",
])
def test_budget_grammar_refuses_the_family_of_malformed_limits(text):
    with pytest.raises(RagexpInputError, match="budget|finite"):
        budgets.parse_budget(text)
    with pytest.raises(RagexpInputError):
        budgets.parse_budget(123)  # not a string


def test_budget_check_within_over_unmeasured_and_near():
    budget = budgets.parse_budget("cost/latency_p95_ms <= 100")
    assert budgets.check(budget, {"cost.latency_p95_ms": 120.0}).status == budgets.OVER
    assert budgets.check(budget, {}).status == budgets.UNMEASURED
    near = budgets.check(budget, {"cost.latency_p95_ms": 97.0, "cost.latency_p95_ms_spread": 5.0})
    assert near.status == budgets.WITHIN and near.near and "within the repeats' spread" in near.describe()
    assert not budgets.check(budget, {"cost.latency_p95_ms": 50.0, "cost.latency_p95_ms_spread": 5.0}).near


def test_any_p95_latency_key_counts_ragexps_and_a_black_box_systems():
    assert keys.is_latency_p95("cost.latency_p95_ms") and keys.is_latency_p95("cost/endpoint_latency_p95_ms")
    assert not keys.is_latency_p95("cost.latency_rerank_p95_ms")  # a stage, part of the total
    assert not keys.is_latency_p95("cost.latency_p50_ms") and not keys.is_latency_p95("time.retrieval_s")
    assert keys.latency_p95_key(["cost/endpoint_latency_p95_ms", "cost.latency_search_p95_ms"]) == "cost.endpoint_latency_p95_ms"
    assert keys.latency_p95_key(["cost.endpoint_latency_p95_ms", "cost.latency_p95_ms"]) == "cost.latency_p95_ms"


def test_cost_keys_round_trip_to_the_mlflow_cost_section_and_are_lower_is_better():
    for key in ("cost.latency_p95_ms", "cost.endpoint_latency_p50_ms", "cost.index_bytes", "cost.money_per_1k_queries"):
        assert to_mlflow(key) == "cost/" + key[len("cost."):] and from_mlflow(to_mlflow(key)) == key
        assert measure(key).level == COST and measure(key).lower_is_better
    assert not measure("cost.throughput_qps").lower_is_better


@pytest.mark.parametrize("node, field", [
    ({"latency_queries": -1}, "cost.latency_queries"),
    ({"latency_repeats": 0}, "cost.latency_repeats"),
    ({"prices": {"gpt": {"input_per_1m": -1}}}, "cost.prices.gpt.input_per_1m"),
    ({"prices": {"gpt": {"per_token": 1}}}, "cost.prices.gpt"),
    ({"prices": {"gpt": 3}}, "cost.prices.gpt"),
    ({"budgets": ["latency < 3"]}, "cost.budgets[0]"),
    ({"budgets": "cost/latency_p95_ms<=3"}, "cost.budgets"),
])
def test_cost_settings_refuse_bad_values_naming_the_field(node, field):
    with pytest.raises(RagexpInputError) as err:
        cost_settings(node)
    assert err.value.field == field


# --- stage clock, cache bypass, token meter -----------------------------------------------------

def test_stage_marks_count_only_while_listening_and_nested_marks_once():
    with stage(QUERY_ENCODING):
        pass  # nobody listens: nothing recorded, no error
    with listening() as clock:
        with stage(QUERY_ENCODING):
            with stage(QUERY_ENCODING):  # e.g. a hybrid's dense component inside the hybrid's own mark
                pass
        with stage(FUSION):
            pass
    assert set(clock.seconds) == {QUERY_ENCODING, FUSION}
    assert all(seconds >= 0 for seconds in clock.seconds.values())


def test_uncached_computes_every_value_and_stores_nothing(tmp_path):
    cache = StageCache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return np.arange(3)

    with uncached():
        cache.get_or_compute_array("s", {"k": 1}, compute)
        cache.get_or_compute_array("s", {"k": 1}, compute)
        cache.put_json("j", {"k": 1}, [1])
        assert cache.get_json("j", {"k": 1}) is None
    assert len(calls) == 2 and not any(tmp_path.iterdir())
    cache.get_or_compute_array("s", {"k": 1}, compute)
    cache.get_or_compute_array("s", {"k": 1}, compute)
    assert len(calls) == 3  # outside: stored once, read back


def response(prompt_tokens: int, completion_tokens: int) -> LLMResponse:
    return LLMResponse(text="ok", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cached=False,
                       model="m", latency_s=0.1)


def test_token_meter_counts_made_and_cached_calls_and_the_bypass_skips_the_cache(tmp_path):
    cache = CallCache(tmp_path / "calls")
    made = []

    def call():
        made.append(1)
        return response(7, 3)

    cached_call(cache, "m", [{"role": "user", "content": "x"}], {}, call)  # outside a meter: counted nowhere
    with metered() as usage:
        cached_call(cache, "m", [{"role": "user", "content": "x"}], {}, call)  # read back: the same tokens
        with uncached():
            cached_call(cache, "m", [{"role": "user", "content": "x"}], {}, call)  # made again, not read
    assert len(made) == 2 and cache.hits == 1
    assert usage.by_model == {"m": [14, 6]} and usage.calls == 2


def test_token_costs_per_query_and_money_from_the_price_table():
    generation, judging = TokenUsage(), TokenUsage()
    generation.add("gpt-4o-mini", 1000, 200)
    generation.add("gpt-4o-mini", 3000, 600)
    generation.queries = 2
    judging.add("smollm2-135m@abcdef", 500, 0)
    judging.queries = 1
    settings = cost_settings({"prices": {"gpt-4o-mini": {"input_per_1m": 0.15, "output_per_1m": 0.6}},
                              "currency": "EUR"})
    out, notes = token_costs({"generation": generation, "judging": judging}, settings)
    assert out["generation_tokens_in_per_query"] == 2000 and out["generation_tokens_out_per_query"] == 400
    assert out["money_generation_per_query"] == pytest.approx((2000 * 0.15 + 400 * 0.6) / 1e6)
    assert out["judge_tokens_in_per_query"] == 500 and out["judge_queries_metered"] == 1
    assert "money_per_1k_queries" not in out and notes == [
        "cost: no price for smollm2-135m@abcdef in cost.prices; judging money not computed"]
    priced = cost_settings({"prices": {"gpt-4o-mini": {"input_per_1m": 0.15, "output_per_1m": 0.6},
                                       "smollm2-135m": {"input_per_1m": 0.01}}})  # a GGUF id found by its name
    out, notes = token_costs({"generation": generation, "judging": judging}, priced)
    assert not notes and out["money_per_1k_queries"] == pytest.approx(
        1000 * ((2000 * 0.15 + 400 * 0.6) / 1e6 + 500 * 0.01 / 1e6))


# --- sizes, memory, latency statistics ----------------------------------------------------------

def test_faiss_index_bytes_equal_what_faiss_serialises_up_to_its_header():
    vectors = np.random.default_rng(0).random((800, 32), dtype=np.float32)
    hnsw = faiss.IndexHNSWFlat(32, 16, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(32), 32, 8, faiss.METRIC_INNER_PRODUCT)
    ivf.train(vectors)
    flat = faiss.IndexFlatIP(32)
    for index in (flat, hnsw, ivf):
        index.add(vectors)
        serialised = faiss.serialize_index(index).nbytes
        assert 0 <= serialised - faiss_index_bytes(index) <= 512, type(index).__name__
    assert faiss_index_bytes(flat) == 800 * 32 * 4


def test_peak_rss_is_reset_per_job():
    if not memory.reset_peak():
        pytest.skip("this kernel does not let a process reset its peak RSS")
    block = np.ones(64 * 1024 * 1024 // 8)  # 64 MiB touched
    high = memory.peak_rss_bytes()
    del block
    assert memory.reset_peak() and memory.peak_since() == "job"
    assert memory.peak_rss_bytes() <= high - 48 * 1024 * 1024


def test_latency_statistics_are_numpys_over_the_per_query_medians():
    rng = np.random.default_rng(3)
    report = LatencyReport(repeats=3)
    for q in range(25):
        search = list(rng.uniform(1, 5, 3))
        rerank = list(rng.uniform(10, 50, 3))
        report.times[f"q{q}"] = {"search": search, "rerank": rerank, TOTAL: [a + b for a, b in zip(search, rerank)]}
    out = report.aggregates()
    medians = {stage: [float(np.median(t[stage])) for t in report.times.values()] for stage in ("search", "rerank", TOTAL)}
    assert out["latency_search_p95_ms"] == pytest.approx(np.percentile(medians["search"], 95))
    assert out["latency_rerank_mean_ms"] == pytest.approx(np.mean(medians["rerank"]))
    assert out["latency_p50_ms"] == pytest.approx(np.median(medians[TOTAL]))
    per_repeat = [np.percentile([t[TOTAL][r] for t in report.times.values()], 95) for r in range(3)]
    assert out["latency_p95_ms_spread"] == pytest.approx(max(per_repeat) - min(per_repeat))


# --- whole runs on the tiny dataset -------------------------------------------------------------

def run_tiny(tiny_dataset, tmp_path: Path, *overrides: str, name: str = "run") -> RunResults:
    cfg = compose_run_config(tiny_dataset, tmp_path / "cache", *overrides)
    return run_job(job_spec(cfg, overrides), output_dir=tmp_path / name, log_to=None).output.results


def test_a_bm25_run_logs_its_index_size_build_and_served_latency_and_the_probe_writes_no_cache(tiny_dataset, tmp_path):
    first = run_tiny(tiny_dataset, tmp_path, name="first")
    cost = {k: v for k, v in first.aggregates.items() if k.startswith("cost.")}
    assert "cost.latency_p95_ms" not in cost  # the probe is an option of its own
    assert first.meta["cost"]["index"]["build"].startswith("cold") and cost["cost.index_build_s"] > 0
    [entry] = (tmp_path / "cache" / "bm25-index").iterdir()
    with np.load(entry / "payload.npz") as stored:  # what the stage cache holds for this index
        assert cost["cost.index_bm25_bytes"] == sum(stored[name].nbytes for name in stored.files) == cost["cost.index_bytes"]
    assert cost["cost.peak_rss_bytes"] > 50 * 1024 * 1024
    files_before = sorted(str(p) for p in (tmp_path / "cache").rglob("*"))

    second = run_tiny(tiny_dataset, tmp_path, "cost.latency_queries=4", "cost.latency_repeats=3", name="second")
    assert sorted(str(p) for p in (tmp_path / "cache").rglob("*")) == files_before  # the probe stored nothing
    assert "cost.index_build_s" not in second.aggregates  # read back from the cache: not a build time
    assert "read back" in second.meta["cost"]["index"]["build"]
    latency = second.meta["cost"]["latency"]
    assert latency["queries"] == 4 and latency["repeats"] == 3
    medians = [stages["total"] for stages in latency["per_query_ms"].values()]
    assert second.aggregates["cost.latency_p95_ms"] == pytest.approx(np.percentile(medians, 95), abs=2e-3)
    assert {"cost.latency_search_p50_ms", "cost.latency_p95_ms_spread"} <= set(second.aggregates)
    assert "cost.latency_query_encoding_p50_ms" not in second.aggregates  # BM25 has no query encoder
    assert second.aggregates["hit_rate_at_5"] == first.aggregates["hit_rate_at_5"]
    third = run_tiny(tiny_dataset, tmp_path, name="third")  # rankings read back, the index sized before: not loaded
    assert third.meta["cost"]["index"]["build"].startswith("not loaded")
    assert third.aggregates["cost.index_bytes"] == first.aggregates["cost.index_bytes"]


def test_cost_can_be_switched_off(tiny_dataset, tmp_path):
    results = run_tiny(tiny_dataset, tmp_path, "cost.enabled=false")
    assert not any(key.startswith("cost.") for key in results.aggregates) and "cost" not in results.meta


@pytest.mark.slow  # answer relevance loads the embedding model
def test_generation_tokens_and_money_equal_what_the_endpoint_reported_also_from_the_call_cache(tiny_dataset, tmp_path,
                                                                                                monkeypatch):
    monkeypatch.delenv("RAGEXP_TEST_NO_KEY", raising=False)
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("RAGEXP_ALLOWED_ENDPOINTS", f"{server.base_url}=RAGEXP_TEST_NO_KEY")  # the machine allows it
        overrides = ["generator=openai", f"generator.model.base_url={server.base_url}", "generator.model.model=fake-model",
                     "generator.model.api_key_env=RAGEXP_TEST_NO_KEY", "generator.model.max_retries=0", "judge=lexical",
                     "+cost.prices.fake-model.input_per_1m=2.5", "+cost.prices.fake-model.output_per_1m=10"]
        first = run_tiny(tiny_dataset, tmp_path, *overrides, name="first")
        usage = [reported_usage(request) for request in server.requests]
        hits = server.hits
        second = run_tiny(tiny_dataset, tmp_path, *overrides, name="second")
    n = len(first.per_query)
    assert hits == n and server.hits == n  # the second run read every answer from the model-call cache
    prompt, completion = sum(u[0] for u in usage) / n, sum(u[1] for u in usage) / n
    for results in (first, second):
        assert results.aggregates["cost.generation_tokens_in_per_query"] == pytest.approx(prompt)
        assert results.aggregates["cost.generation_tokens_out_per_query"] == pytest.approx(completion)
        assert results.aggregates["cost.money_per_1k_queries"] == pytest.approx(1000 * (prompt * 2.5 + completion * 10) / 1e6)
        assert results.meta["cost"]["currency"] == "USD"
    assert first.aggregates["cost.judge_tokens_in_per_query"] == 0  # the lexical judge calls no model
    assert first.aggregates["cost.judge_queries_metered"] == n
    assert "cost.judge_tokens_in_per_query" not in second.aggregates  # every verdict read from the judge cache


# --- the gate -----------------------------------------------------------------------------------

def results_with(latency: float, spread: float = 0.0, index_bytes: float = 1e6) -> RunResults:
    rows = [QueryResult(query_id=f"q{i}", metrics={"hit_rate_at_5": 1.0 if i % 3 else 0.0}, relevant={"c": 1})
            for i in range(30)]
    aggregates = {"hit_rate_at_5": 20 / 30, "cost.latency_p95_ms": latency, "cost.latency_p95_ms_spread": spread,
                  "cost.index_bytes": index_bytes}
    return RunResults(meta={"evalset_fingerprint": "e", "corpus_fingerprint": "c", "context_k": 5},
                      aggregates=aggregates, per_query=rows)


def test_a_latency_budget_fails_the_config_above_it_and_passes_the_one_below(tmp_path, capsys):
    plain, reranked = results_with(12.0, 1.0), results_with(48.0, 2.0)
    paths = {name: r.save(tmp_path / f"{name}.json") for name, r in (("plain", plain), ("reranked", reranked))}
    argv = ["--metrics", "hit_rate_at_5", "--budget", "cost/latency_p95_ms <= 30"]
    assert gate_command.run(gate_command_args(paths["plain"], paths["plain"], argv)) == 0
    assert gate_command.run(gate_command_args(paths["plain"], paths["reranked"], argv)) == 1
    out = capsys.readouterr().out
    assert "REGRESSION (cost.latency_p95_ms over budget)" in out and "cost.latency_p95_ms <= 30: 48" in out
    report = run_gate(plain, reranked, GateSpec.from_mapping({"metrics": {"hit_rate_at_5": None},
                                                              "budgets": ["cost.index_bytes <= 2e9"]}))
    assert report.status == "pass" and report.budgets[0].status == budgets.WITHIN
    with pytest.raises(RagexpInputError, match="has no cost.money_per_1k_queries"):
        run_gate(plain, reranked, metrics=["hit_rate_at_5"], budgets=["cost/money_per_1k_queries <= 1"])


def gate_command_args(baseline: Path, candidate: Path, argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    gate_command.add_arguments(parser)
    return parser.parse_args(["--baseline", str(baseline), "--candidate", str(candidate), *argv])


def test_a_cost_tolerance_is_widened_to_the_repeats_spread():
    spec = GateSpec.from_mapping({"metrics": {"cost/latency_p95_ms": {"tolerance": {"relative": 0.1}}}})
    within_noise = run_gate(results_with(100.0, 30.0), results_with(125.0, 30.0), spec)
    [verdict] = within_noise.costs
    assert verdict.tolerance == 30.0 and verdict.verdict == "pass" and "widened" in verdict.tolerance_rule
    beyond = run_gate(results_with(100.0, 2.0), results_with(125.0, 2.0), spec)
    assert beyond.costs[0].verdict == "regression" and beyond.status == "regression" and beyond.exit_code == 1
    data = json.loads(gate_command.render_json(beyond))
    assert data["costs"][0]["metric"] == "cost.latency_p95_ms"
    with pytest.raises(RagexpInputError, match="missing from the candidate"):
        run_gate(results_with(1.0), RunResults(meta={"evalset_fingerprint": "e"}, aggregates={},
                                               per_query=results_with(1.0).per_query), spec)


# --- names, compare, noise line -----------------------------------------------------------------

def test_fp32_and_int8_runs_of_one_config_get_different_names():
    names = set()
    for precision in ("fp32", "int8"):
        embedding = {"name": "minilm", "model": "minilm", "precision": precision}
        config = {"retrieval": {"name": "dense", "_target_": "x", "encoder": embedding}, "reranker": {"name": "none"},
                  "generator": {"name": "none"}, "embedding": embedding}
        names.add(run_name(config, "markdown-1024"))
        assert run_name(config, "markdown-1024", {"embedding.precision": precision}) == f"precision={precision}"
    assert names == {"markdown-1024 · dense · rerank=none", "markdown-1024 · dense · rerank=none · int8"}


def test_compare_table_shows_costs_in_their_unit_lower_best():
    rows = {"a": {"hit_rate_at_5": 0.8, "cost.latency_p95_ms": 41.26, "cost.index_bytes": 3 * 1024 * 1024},
            "b": {"hit_rate_at_5": 0.7, "cost.endpoint_latency_p95_ms": 230.0, "cost.index_bytes": 1024 * 1024}}
    metrics = ["hit_rate_at_5", *cost_metrics(set(itertools.chain(*rows.values())))]
    assert metrics == ["hit_rate_at_5", "cost.latency_p95_ms", "cost.endpoint_latency_p95_ms", "cost.index_bytes"]
    table = format_table(["a", "b"], rows, metrics)
    header, _, a, b = table.splitlines()
    assert header.split() == ["run", "hit_rate_at_5", "p95", "ms", "endpoint", "p95", "ms", "index", "MB"]
    assert a.split() == ["a", "0.8000*", "41.3*", "-", "3.0"] and b.split() == ["b", "0.7000", "-", "230.0*", "1.0*"]


def test_the_noise_line_at_a_ceiling_says_it_is_uninformative():
    line = vs_best.noise_line(40, 1.0, "hit rate@5")
    assert "uninformative" in line and "0.025" not in line and "1/n" not in line
    assert "below ~0.068 is noise" in vs_best.noise_line(131, 0.8)
