"""Speed of a run's generator calls, counted so that cache hits and prefill do not inflate it.

Over the generations of one run (failed calls left out)::

    gen.cached_calls          = # answers served from the call cache (no model work; excluded below)
    gen.prefill_s             = sum of prefill_s over the other calls (the pass over the prompt)
    gen.decode_s              = sum of decode_s over them (the passes after the first new token)
    gen.prefill_tokens_per_s  = sum prompt_tokens / gen.prefill_s
    gen.decode_tokens_per_s   = sum (completion_tokens - 1) / gen.decode_s
    gen.length_capped         = # answers (cached or not) that stopped at max_new_tokens
    gen.repetition_stopped    = # answers (cached or not) a local model ended where they started
                                repeating themselves (``repeat_ngram``, :mod:`ragexp.llm.answer_end`)
    gen.degenerate_stopped    = # answers (cached or not) a local model ended where they degenerated
                                into list markers or one token over and over (the same stop)

A call answered in a batch carries its share of the batch's time (see
:class:`~ragexp.llm.base.LLMResponse`), so these are throughputs of the batched work. Calls whose
backend does not split its time (HTTP endpoints: ``prefill_s == decode_s == 0``) add to neither
rate; their ``latency_s`` sum is ``gen.latency_s``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def speed_metrics(generations: Iterable[Any]) -> dict[str, float]:
    """The ``gen.*`` speed metrics above for ``generations`` (objects with the fields of
    :class:`~reference_pipelines.generators.base.Generation`)."""
    answered = [g for g in generations if not g.error]
    fresh = [g for g in answered if not g.cached]
    prefill_s = sum(g.prefill_s for g in fresh)
    decode_s = sum(g.decode_s for g in fresh)
    out = {
        "gen.cached_calls": float(len(answered) - len(fresh)),
        "gen.length_capped": float(sum(g.finish_reason == "length" for g in answered)),
        "gen.repetition_stopped": float(sum(g.finish_reason == "repetition" for g in answered)),
        "gen.degenerate_stopped": float(sum(g.finish_reason == "degenerate" for g in answered)),
        "gen.latency_s": sum(g.latency_s for g in fresh),
        "gen.prefill_s": prefill_s,
        "gen.decode_s": decode_s,
    }
    if prefill_s > 0:
        out["gen.prefill_tokens_per_s"] = sum(g.prompt_tokens for g in fresh if g.prefill_s > 0) / prefill_s
    if decode_s > 0:
        out["gen.decode_tokens_per_s"] = sum(max(0, g.completion_tokens - 1) for g in fresh if g.decode_s > 0) / decode_s
    return out
