"""The cost metric keys, and how any of them is found, whoever logged it.

Results keys are ``cost.<name>`` (MLflow ``cost/<name>``, :mod:`ragexp.tracking.metric_names`).
ragexp's own served latency is ``cost.latency_{p50,p95,mean}_ms`` (the served stages summed) and
``cost.latency_<stage>_{p50,p95,mean}_ms`` per stage; a black-box system logs
``cost.endpoint_latency_{p50,p95,mean}_ms``. The sweep's Pareto front, the gate and compare treat
**any** key matching :data:`LATENCY_P95` as a p95 latency, so both kinds (and any later one) merge.
Every ``cost.*`` measure is lower-is-better except throughputs (``*_qps``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PREFIX = "cost."
MLFLOW_PREFIX = "cost/"
LATENCY_P95_MS = "cost.latency_p95_ms"
#: Any p95 latency in milliseconds: ``cost.latency_p95_ms``, ``cost.endpoint_latency_p95_ms`` ...
LATENCY_P95 = re.compile(r"cost\.(?:[a-z0-9_]+_)?latency_p95_ms")
INDEX_BYTES = "cost.index_bytes"
PEAK_RSS_BYTES = "cost.peak_rss_bytes"
MONEY_PER_1K = "cost.money_per_1k_queries"
GEN_TOKENS_IN = "cost.generation_tokens_in_per_query"
GEN_TOKENS_OUT = "cost.generation_tokens_out_per_query"


def results_key(key: str) -> str:
    """``cost/x`` (an MLflow key, as a user may type it) -> ``cost.x``; other keys unchanged."""
    return PREFIX + key[len(MLFLOW_PREFIX):] if key.startswith(MLFLOW_PREFIX) else key


def is_cost(key: str) -> bool:
    return key.startswith(PREFIX)


def higher_is_better(key: str) -> bool:
    """Throughput (``*_qps``); every other cost is better lower."""
    return key.endswith("_qps")


def is_latency_p95(key: str) -> bool:
    """An end-to-end p95 latency (module docstring); a stage's (``cost.latency_rerank_p95_ms``)
    does not match: it is part of one."""
    return bool(LATENCY_P95.fullmatch(results_key(key)))


def latency_p95_key(keys: Iterable[str]) -> str | None:
    """The p95 latency to plot and rank by among ``keys``: ragexp's served one when present, else
    the first other (sorted, e.g. ``cost.endpoint_latency_p95_ms``), else ``None``."""
    found = sorted(results_key(k) for k in keys if is_latency_p95(k))
    if LATENCY_P95_MS in found:
        return LATENCY_P95_MS
    return found[0] if found else None
