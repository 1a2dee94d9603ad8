"""The generation step batches: answers of a round come from one ``generate_batch`` call and
claims of a round go to the judge in one ``judge_claims_batch`` call, and every per-query
record and metric equals what one call per question gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragexp.judging.judges import LexicalJudge


class OneByOne:
    """A generator with ``generate`` only (a user's generator): the step must call it per item."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.context_k = inner.context_k
        self.params = inner.params

    def generate(self, query, contexts):
        return self.inner.generate(query, contexts)


class Batching(OneByOne):
    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.batches: list[int] = []

    def generate_batch(self, requests):
        self.batches.append(len(requests))
        return [self.inner.generate(query, contexts) for query, contexts in requests]


class BatchingJudge(LexicalJudge):
    """The lexical judge with a batch entry point that records its batch sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def judge_claims_batch(self, items):
        self.batches.append(len(items))
        return [self.judge_claims(claims, context) for claims, context in items]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from hydra import compose, initialize_config_dir

    from ragexp.config.compose import CONFIG_DIR
    from ragexp.config.schema import register_schema
    from ragexp.evaluation.pipeline import build_pipeline
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.evaluation.prepared import prepare_data
    from ragexp.runtime.stage_cache import StageCache

    cache_dir: Path = tmp_path_factory.mktemp("cache")
    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["retrieval=bm25", "generator=extractive", "judge=lexical",
                                           f"cache_dir={cache_dir}", "progress=false"])  # fmt: skip
    cache = StageCache(cache_dir)
    spec = job_spec(cfg)
    return spec, cache, build_pipeline(spec, cache), prepare_data(spec, cache, progress=False)


def _execute(demo_run, generator, judge, tmp_path):
    from ragexp.evaluation.runner import execute
    from ragexp.runtime.stage_cache import StageCache

    spec, _, pipeline, data = demo_run
    pipeline.generator, pipeline.judge = generator, judge
    fresh = StageCache(tmp_path)  # no judge records from the other run
    return execute(spec, cache=fresh, data=data, pipeline=pipeline, run_name="generation-step").results


def test_rounds_of_batches_give_the_records_of_one_call_per_question(demo_run, tmp_path):
    from ragexp.evaluation.generation_step import ROUND

    _, _, pipeline, data = demo_run
    extractive = pipeline.generator
    batching, judge = Batching(extractive), BatchingJudge()
    batched = _execute(demo_run, batching, judge, tmp_path / "a")
    single = _execute(demo_run, OneByOne(extractive), LexicalJudge(), tmp_path / "b")

    n = len(data.evalset.items)
    assert n == 148 and batching.batches == [ROUND] * (n // ROUND) + [n % ROUND]
    assert len(judge.batches) == len(batching.batches) and max(judge.batches) <= ROUND
    keys = ("answer", "failure_class", "claims", "metrics")
    assert [{k: getattr(r, k) for k in keys} for r in batched.per_query] == [{k: getattr(r, k) for k in keys} for r in single.per_query]
    timing = {"gen.generate_wall_s", "gen.judge_wall_s", "gen.latency_s", "cost.index_build_s", "cost.peak_rss_bytes"}
    assert {k: v for k, v in batched.aggregates.items() if k not in timing} == {
        k: v for k, v in single.aggregates.items() if k not in timing
    }
    assert batched.aggregates["n_claims"] > 50 and batched.aggregates["gen.cached_calls"] == 0


class CopiesLabels(OneByOne):
    """Answers every question with its context's first label line copied in front of the extractive answer,
    and every fifth with markers only (what SmolLM2 did on the demo before #41)."""

    def generate(self, query, contexts):
        from dataclasses import replace

        from ragexp.data.context import format_context

        generation = self.inner.generate(query, contexts)
        label = format_context(contexts[:1]).split("\n", 1)[0]
        answer = f"{label}\n{generation.answer}" if hash(query) % 5 else "1. 1. 1. 1. 1. 1."
        return replace(generation, answer=answer)


def test_label_copies_are_taken_out_before_judging_and_counted(demo_run, tmp_path):
    """The judge never sees a copied label line as a claim; the run counts the answers that had one
    (``gen.label_copies``), and the degenerate ones (``gen.degenerate_answers``), whose markers are no claims."""
    _, _, pipeline, data = demo_run
    extractive = pipeline.generator  # _execute puts each generator into the shared pipeline
    results = _execute(demo_run, CopiesLabels(extractive), LexicalJudge(), tmp_path)
    plain = _execute(demo_run, OneByOne(extractive), LexicalJudge(), tmp_path / "plain")
    copied = [r for r in results.per_query if r.label_lines_removed]
    degenerate = [r for r in results.per_query if r.answer == "1. 1. 1. 1. 1. 1."]
    assert results.aggregates["gen.label_copies"] == len(copied) > 100
    assert results.aggregates["gen.degenerate_answers"] == len(degenerate) > 10
    assert all(r.label_lines_removed == 1 for r in copied)
    by_id = {r.query_id: r for r in plain.per_query}
    for r in copied:  # exactly the answer without the label: the same claims and verdicts as never copied
        assert r.answer == by_id[r.query_id].answer and r.claims == by_id[r.query_id].claims
    assert all(r.n_claims == 0 for r in degenerate)
    assert plain.aggregates["gen.label_copies"] == 0 == plain.aggregates["gen.degenerate_answers"]
