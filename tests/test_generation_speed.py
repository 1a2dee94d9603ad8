"""Generation speed metrics: decode apart from prefill, cache hits and failures not counted."""

from __future__ import annotations

import pytest

from ragexp.evaluation.generation_speed import speed_metrics
from reference_pipelines.generators.base import Generation


def _gen(**fields) -> Generation:
    return Generation(answer="a", prompt="p", model_id="m", **fields)


def test_rates_split_prefill_and_decode_and_leave_out_cached_and_failed_calls():
    generations = [
        _gen(prompt_tokens=500, completion_tokens=11, prefill_s=1.0, decode_s=0.5, latency_s=1.5, finish_reason="eos"),
        _gen(prompt_tokens=300, completion_tokens=21, prefill_s=1.0, decode_s=1.5, latency_s=2.5, finish_reason="length"),
        # a cache hit keeps the latency of its original call: it must not count as speed
        _gen(prompt_tokens=400, completion_tokens=50, latency_s=9.0, cached=True, finish_reason="length"),
        _gen(prompt_tokens=0, completion_tokens=0, latency_s=3.0, error="timeout: no answer"),
    ]
    metrics = speed_metrics(generations)
    assert metrics["gen.prefill_tokens_per_s"] == pytest.approx((500 + 300) / 2.0)
    assert metrics["gen.decode_tokens_per_s"] == pytest.approx((10 + 20) / 2.0)  # the first token is prefill's
    assert metrics["gen.prefill_s"] == 2.0 and metrics["gen.decode_s"] == 2.0 and metrics["gen.latency_s"] == 4.0
    assert metrics["gen.cached_calls"] == 1.0 and metrics["gen.length_capped"] == 2.0


def test_no_rates_without_timed_calls():
    metrics = speed_metrics([_gen(completion_tokens=5, latency_s=1.0, cached=True), _gen(completion_tokens=5, latency_s=0.7)])
    assert "gen.decode_tokens_per_s" not in metrics and "gen.prefill_tokens_per_s" not in metrics
    assert metrics["gen.cached_calls"] == 1.0 and metrics["gen.latency_s"] == 0.7  # an HTTP call: latency only
