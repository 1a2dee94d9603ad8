"""Served latency: each query alone through the run's pipeline on its warm index, per stage.

A batched evaluation run measures throughput (``time/`` in MLflow: a whole stage over every query,
often read back from the stage cache), not what a user of the served pipeline waits for. This
probe measures that (``cost.latency_queries`` > 0):

1. ``n`` eval queries, a seeded sample (seed 0, eval-set order), the same in every run of the eval
   set, so a sweep's configs are timed on the same queries;
2. the retriever's index is in memory (built or loaded by the caller), the models are loaded by
   one untimed warm-up pass over the sampled queries;
3. ``repeats`` timed passes; in each, every query goes alone through retrieval, the reranker, the
   generator (and, apart, the judge) with every query-dependent cache bypassed
   (:func:`ragexp.runtime.uncached.uncached`: query embeddings, rerank scores, model calls made
   afresh); passage vectors are the warm index and stay in memory; no progress bar is drawn inside
   a pass (:func:`ragexp.runtime.progress.suppressed`), the probe's own bar counts the passes;
4. stages: the retriever's ``search`` call is split by the marks its components make
   (:mod:`ragexp.runtime.stage_clock`: ``query_encoding``, ``fusion``; the rest is ``search``);
   ``rerank``, ``generation`` and ``judging`` are the calls themselves;
5. a query's latency per stage is the **median of its repeats**; the run's ``p50``/``p95``/``mean``
   are over the queries' medians (percentiles by linear interpolation, numpy's default). The
   end-to-end latency is the sum of the served stages (query encoding, search, fusion, rerank,
   generation: :data:`~ragexp.runtime.stage_clock.SERVED_STAGES`), per repeat, then its median:
   judging is evaluation work, reported apart. ``cost.latency_p95_ms_spread`` is how far the p95
   of single repeats lies apart (max - min): the run-to-run noise of the p95. The machine's
   1-minute load average before and after the probe is recorded with the run
   (``meta.cost.latency.load_1min``): latencies of configs timed one after the other on a shared
   machine compare only as well as the load held still (docs/cost.md).

Keys (``cost.`` results keys; ms): ``latency_{p50,p95,mean}_ms``, ``latency_p95_ms_spread``,
``latency_<stage>_{p50,p95,mean}_ms`` for each stage the pipeline has.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragexp.data.context import format_context
from ragexp.judging.answer_relevance import answer_relevance_batch
from ragexp.judging.faithfulness import faithfulness_batch
from ragexp.metrics.ranking import trec_order
from ragexp.runtime import progress
from ragexp.runtime.stage_clock import (
    FUSION,
    GENERATION,
    JUDGING,
    QUERY_ENCODING,
    RERANK,
    SEARCH,
    SERVED_STAGES,
    listening,
)
from ragexp.runtime.uncached import uncached

SAMPLE_SEED = 0
TOTAL = "total"


def sample_queries(items: Sequence[Any], n: int) -> list[Any]:
    """``n`` items, a seeded sample kept in eval-set order (all of them when ``n >= len``)."""
    if n >= len(items):
        return list(items)
    chosen = sorted(random.Random(SAMPLE_SEED).sample(range(len(items)), n))
    return [items[i] for i in chosen]


@dataclass
class LatencyReport:
    """Milliseconds per query id, stage and repeat: ``times[query][stage][repeat]``."""

    repeats: int
    times: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    load_1min: list[float] = field(default_factory=list)  # before and after the timed passes

    def medians(self, stage: str) -> list[float]:
        return [statistics.median(stages[stage]) for stages in self.times.values() if stage in stages]

    def stages(self) -> list[str]:
        present = {stage for stages in self.times.values() for stage in stages}
        return [s for s in (*SERVED_STAGES, JUDGING, TOTAL) if s in present]

    def aggregates(self) -> dict[str, float]:
        """The ``cost.`` keys of the module docstring (without the prefix)."""
        out: dict[str, float] = {}
        for stage in self.stages():
            values = np.array(self.medians(stage))
            name = "latency" if stage == TOTAL else f"latency_{stage}"
            out[f"{name}_p50_ms"] = float(np.percentile(values, 50))
            out[f"{name}_p95_ms"] = float(np.percentile(values, 95))
            out[f"{name}_mean_ms"] = float(values.mean())
        per_repeat = [float(np.percentile([stages[TOTAL][r] for stages in self.times.values()], 95))
                      for r in range(self.repeats)]
        out["latency_p95_ms_spread"] = max(per_repeat) - min(per_repeat)
        return out

    def record(self) -> dict[str, Any]:
        """For ``meta.cost.latency``: how it was measured and each query's medians per stage."""
        return {"queries": len(self.times), "repeats": self.repeats, "statistic": "median of repeats per query",
                "load_1min": [round(load, 2) for load in self.load_1min],
                "per_query_ms": {query: {stage: round(statistics.median(times), 3) for stage, times in stages.items()}
                                 for query, stages in self.times.items()}}


def _one_query(item: Any, data: Any, pipeline: Any, depth: int, context_k: int) -> dict[str, float]:
    """Seconds per stage of ``item`` alone (module docstring, step 4)."""
    times: dict[str, float] = {}
    with listening() as clock:
        started = time.perf_counter()
        ranking = trec_order(pipeline.retriever.search([item.query], depth)[0])
        retrieve = time.perf_counter() - started
    marked = {stage: clock.seconds[stage] for stage in (QUERY_ENCODING, FUSION) if stage in clock.seconds}
    times.update(marked)
    times[SEARCH] = max(retrieve - sum(marked.values()), 0.0)
    if pipeline.reranker is not None:
        started = time.perf_counter()
        ranking = pipeline.reranker.rerank([item.query], [ranking], data.chunks_by_id)[0]
        times[RERANK] = time.perf_counter() - started
    if pipeline.generator is None:
        return times
    contexts = [data.chunks_by_id[cid] for cid, _ in trec_order(ranking)[:context_k]]
    started = time.perf_counter()
    generation = pipeline.generator.generate(item.query, contexts)
    times[GENERATION] = time.perf_counter() - started
    if pipeline.judge is not None and not generation.error:
        encode = pipeline.encoder.encode_queries if pipeline.encoder is not None else None
        started = time.perf_counter()
        faithfulness_batch([(generation.answer, format_context(contexts))], pipeline.judge)
        answer_relevance_batch([item.query], [generation.answer], pipeline.judge, encode)
        times[JUDGING] = time.perf_counter() - started
    return times


def served_latency(data: Any, pipeline: Any, *, depth: int, context_k: int, queries: int, repeats: int,
                   show_progress: bool = True) -> LatencyReport:
    """Time ``queries`` sampled eval queries ``repeats`` times each (module docstring); the
    retriever's index must be in memory."""
    items = sample_queries(data.evalset.items, queries)
    report = LatencyReport(repeats)
    passes = progress.bar(range(repeats), desc="cost: served latency", unit="pass", leave=False,
                          disable=not show_progress)
    with uncached(), progress.suppressed():  # the probe's one bar: none drawn inside a timed query
        for item in items:  # warm-up: models loaded, lazy state built; not timed
            _one_query(item, data, pipeline, depth, context_k)
        report.load_1min.append(os.getloadavg()[0])
        for _ in passes:
            for item in items:
                times = _one_query(item, data, pipeline, depth, context_k)
                times[TOTAL] = sum(seconds for stage, seconds in times.items() if stage in SERVED_STAGES)
                stages = report.times.setdefault(item.id, {})
                for stage, seconds in times.items():
                    stages.setdefault(stage, []).append(seconds * 1000.0)
        report.load_1min.append(os.getloadavg()[0])
    return report
