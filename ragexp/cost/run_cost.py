"""One run's cost, measured after its quality: the ``cost.*`` aggregates and ``meta.cost``.

Order (each step only when ``cost.enabled``, the default):

1. the index: the retriever holds it if retrieval ran; when retrieval came from the stage cache it
   is loaded now (:func:`ragexp.cost.index.timed_index`) when the served latency needs it or no
   earlier job of the process sized the same index (:func:`ragexp.cost.index.known_footprint`). ``cost.index_build_s`` is logged only for a cold build (nothing read from a cache),
   or from a rebuild with every cache bypassed when ``cost.index_rebuild=true``; otherwise the
   index was read back and ``meta.cost.index`` says how long that took instead;
2. its size (:func:`ragexp.cost.index.footprint`): ``cost.index_bytes`` and its parts;
3. served latency (:mod:`ragexp.cost.latency`) when ``cost.latency_queries`` > 0;
4. tokens and money (:mod:`ragexp.cost.tokens`);
5. ``cost.peak_rss_bytes``: the peak resident memory since the job started
   (:mod:`ragexp.cost.memory`), read last.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ragexp.cost import index as index_cost
from ragexp.cost import memory
from ragexp.cost.latency import served_latency
from ragexp.cost.settings import CostSettings
from ragexp.cost.tokens import token_costs
from ragexp.llm.usage import TokenUsage
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.uncached import uncached

PREFIX = "cost."


def measure_run(settings: CostSettings, data: Any, pipeline: Any, cache: StageCache, *, retrieval: Mapping[str, Any] | None,
                context_k: int, progress: bool, index_build: index_cost.IndexBuild | None, depth: int,
                usage: Mapping[str, TokenUsage], timings: dict[str, float]) -> tuple[dict[str, float], dict[str, Any]]:
    """``(aggregates with the cost. prefix, meta.cost)`` (module docstring); ``index_build`` is how
    retrieval built the index, ``None`` when it did not (rankings from the stage cache). The
    probe's wall time goes to ``timings["cost_latency_s"]``. ``retrieval``: the run's resolved
    ``retrieval`` block (the index's identity); ``context_k``: the chunks the generator sees."""
    if not settings.enabled:
        return {}, {}
    out: dict[str, float] = {}
    record: dict[str, Any] = {"notes": []}
    if getattr(pipeline, "system", None) is not None:
        # A black box has no index here and is timed where it runs: cost.endpoint_latency_* per
        # query (ragexp.evaluation.system_step); its own tokens are not reported to ragexp.
        record["notes"].append("black-box system: no index or served-latency probe here; the endpoint's latency per "
                               "query is cost/endpoint_latency_*")
        return _finish(out, record, usage, settings)
    key = index_cost.index_key(retrieval, data.chunking_config,
                               data.corpus.fingerprint())
    sized = index_cost.known_footprint(key)
    needs_index = sized is None or settings.latency_queries > 0 or settings.index_rebuild
    if index_build is None and needs_index:
        index_build = index_cost.timed_index(pipeline.retriever, data.chunks, cache)
    if index_build is None:
        record["index"] = {"build": "not loaded: rankings read back and its size known from an earlier job"}
    elif settings.index_rebuild:
        with uncached(index=True):
            rebuilt = index_cost.timed_index(pipeline.retriever, data.chunks, cache)
        out["index_build_s"] = rebuilt.seconds
        record["index"] = {"build": "rebuilt with every cache bypassed (cost.index_rebuild)", "seconds": rebuilt.seconds}
    elif index_build.cold:
        out["index_build_s"] = index_build.seconds
        record["index"] = {"build": "cold (nothing read from a cache)", "seconds": index_build.seconds}
    else:
        record["index"] = {"build": "read back from the stage cache: not a build time; cost.index_rebuild=true times "
                                    "a cold build", "seconds": index_build.seconds}
    out.update(sized if sized is not None and index_build is None else index_cost.footprint(pipeline.retriever, key))
    if settings.latency_queries:
        started = time.perf_counter()
        report = served_latency(data, pipeline, depth=depth, context_k=context_k,
                                queries=settings.latency_queries, repeats=settings.latency_repeats,
                                show_progress=progress)
        timings["cost_latency_s"] = time.perf_counter() - started
        out.update(report.aggregates())
        record["latency"] = report.record()
    return _finish(out, record, usage, settings)


def _finish(out: dict[str, float], record: dict[str, Any], usage: Mapping[str, TokenUsage], settings: Any
            ) -> tuple[dict[str, float], dict[str, Any]]:
    """Steps 4 and 5 (module docstring): tokens and money, then the peak RSS, read last."""
    tokens, notes = token_costs(usage, settings)
    out.update(tokens)
    record["notes"] += notes
    if any(key.startswith("money_") for key in tokens):
        record["currency"] = settings.currency
    out["peak_rss_bytes"] = float(memory.peak_rss_bytes())
    record["peak_rss_since"] = memory.peak_since()
    return {PREFIX + key: value for key, value in out.items()}, record
