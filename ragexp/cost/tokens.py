"""LLM tokens per query for generation and judging, and their price.

From the run's two token meters (:mod:`ragexp.llm.usage`, filled by the generation step):

- generation: every item's answer (made, or read back from the model-call cache with the tokens
  the model reported when it was made): ``cost.generation_tokens_{in,out}_per_query`` = the
  meter's prompt / completion tokens over the items generated;
- judging: the verdicts computed in this run (a verdict read back from ragexp's judge cache made
  no call and carries no tokens): ``cost.judge_tokens_{in,out}_per_query`` over those queries
  only, with ``cost.judge_queries_metered`` saying how many they were; a likelihood judge scores
  prompt tokens only.

Money, where ``cost.prices`` prices every model that spent tokens: ``cost.money_<stage>_per_query``
and ``cost.money_per_1k_queries`` (generation and judging per query, times 1000), in
``cost.currency`` (recorded with the run). A model without a price leaves the money out and says
which model it was; tokens are always logged.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragexp.cost.settings import CostSettings
from ragexp.llm.usage import TokenUsage

GENERATION, JUDGING = "generation", "judging"
_PREFIX = {GENERATION: "generation", JUDGING: "judge"}


def token_costs(usage: Mapping[str, TokenUsage], settings: CostSettings) -> tuple[dict[str, float], list[str]]:
    """``(aggregates without the cost. prefix, notes)`` from the meters (module docstring)."""
    out: dict[str, float] = {}
    notes: list[str] = []
    money_per_query = 0.0
    priced_all = True
    for stage in (GENERATION, JUDGING):
        meter = usage.get(stage)
        if meter is None or meter.queries == 0:
            continue
        name = _PREFIX[stage]
        out[f"{name}_tokens_in_per_query"] = meter.prompt_tokens / meter.queries
        out[f"{name}_tokens_out_per_query"] = meter.completion_tokens / meter.queries
        if stage == JUDGING:
            out["judge_queries_metered"] = float(meter.queries)
        unpriced = sorted(model for model in meter.by_model if settings.price_of(model) is None)
        if unpriced:
            priced_all = False
            if settings.prices:
                notes.append(f"cost: no price for {', '.join(unpriced)} in cost.prices; {stage} money not computed")
            continue
        money = sum(settings.price_of(model).of(*counts) for model, counts in meter.by_model.items()) / meter.queries
        out[f"money_{stage}_per_query"] = money
        money_per_query += money
    if priced_all and any(key.startswith("money_") for key in out):
        out["money_per_1k_queries"] = 1000.0 * money_per_query
    return out, notes
