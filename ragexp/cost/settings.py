"""The ``cost`` config group as checked settings: the one reader of it, run before any work.

``cost.prices`` is a table per model: ``{<model>: {input_per_1m: X, output_per_1m: Y}}``, the
price of a million prompt (input) and completion (output) tokens in ``cost.currency``. A model
is found by its id as the run's language model reports it (``gpt-4o-mini``; a local GGUF model
``smollm2-135m@<hash>`` also by the part before ``@``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragexp.cost.budgets import Budget, parse_budget
from ragexp.errors import RagexpInputError
from ragexp.runtime.fingerprint import stable_hash

PRICE_KEYS = ("input_per_1m", "output_per_1m")
MAX_LATENCY_QUERIES = 100_000
MAX_REPEATS = 100


@dataclass(frozen=True)
class Price:
    input_per_1m: float
    output_per_1m: float

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1e6


@dataclass(frozen=True)
class CostSettings:
    enabled: bool = True
    latency_queries: int = 0
    latency_repeats: int = 3
    index_rebuild: bool = False
    prices: Mapping[str, Price] = field(default_factory=dict)
    currency: str = "USD"
    budgets: tuple[Budget, ...] = ()

    def price_of(self, model_id: str) -> Price | None:
        """The price of ``model_id`` (module docstring), ``None`` when the table has none."""
        return self.prices.get(model_id) or self.prices.get(model_id.split("@", 1)[0])


def _number(value: Any, field: str, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise RagexpInputError(f"must be a number >= {low:g}, got {value!r}", field=field)
    return float(value)


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RagexpInputError(f"must be a whole number in [{low}, {high}], got {value!r}", field=field)
    return value


def cost_settings(node: DictConfig | Mapping | None) -> CostSettings:
    """``cfg.cost`` checked (module docstring); a missing node is the defaults."""
    if node is None:
        return CostSettings()
    data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    prices = {}
    table = data.get("prices") or {}
    if not isinstance(table, Mapping):
        raise RagexpInputError("must map model names to {input_per_1m: X, output_per_1m: Y}", field="cost.prices")
    for model, price in table.items():
        field = f"cost.prices.{model}"
        if not isinstance(price, Mapping) or set(price) - set(PRICE_KEYS) or not price:
            raise RagexpInputError(f"must be {{input_per_1m: X, output_per_1m: Y}} (per million tokens), got {price!r}",
                                   field=field)
        prices[str(model)] = Price(*(_number(price.get(key, 0.0), f"{field}.{key}", 0.0) for key in PRICE_KEYS))
    budgets = data.get("budgets") or []
    if not isinstance(budgets, list):
        raise RagexpInputError("must be a list of '<metric> <= <number>' strings", field="cost.budgets")
    return CostSettings(
        enabled=bool(data.get("enabled", True)),
        latency_queries=_integer(data.get("latency_queries", 0), "cost.latency_queries", 0, MAX_LATENCY_QUERIES),
        latency_repeats=_integer(data.get("latency_repeats", 3), "cost.latency_repeats", 1, MAX_REPEATS),
        index_rebuild=bool(data.get("index_rebuild", False)),
        prices=prices,
        currency=str(data.get("currency") or "USD"),
        budgets=tuple(parse_budget(text, f"cost.budgets[{i}]") for i, text in enumerate(budgets)),
    )


def settings_key(node: DictConfig | Mapping | None) -> str:
    """The identity of what a run measures of its cost (the whole ``cost`` node): the config hash
    leaves ``cost`` out (it changes no quality metric), so ``resume`` skips a finished run only when
    this key matches too, and a sweep re-run with ``cost.latency_queries=20`` measures latency."""
    data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})
    return stable_hash(data)[:16]
