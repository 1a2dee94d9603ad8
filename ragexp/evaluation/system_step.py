"""One black-box run's retrieval: responses fetched, passages placed, units scored.

:func:`system_step` is what the runner calls instead of the retrieval step when ``system`` names a
black box (:func:`ragexp.evaluation.runner.execute`): it fetches every query's response
(:mod:`~ragexp.systems.fetch`), places each passage in the corpus (:mod:`~ragexp.systems.locate`),
turns them into units and pooled relevance (:mod:`~ragexp.systems.scoring`) and returns the data
the rest of the run scores exactly as a reference run: a :class:`PreparedData` whose chunks are the
pooled units and whose chunk qrels are the pooled ones, and a
:class:`~ragexp.evaluation.retrieval_step.Retrieved`. Besides, it reports (results keys)::

    black_box.located_rate           placed passages / passages returned (per query too)
    black_box.located_<how>_rate     ... placed exactly / after normalising / by fuzzy alignment
    black_box.n_passages, black_box.n_unlocated, black_box.n_ambiguous, black_box.n_duplicate_passages,
    black_box.n_unreturned_spans     relevant evidence spans no returned passage covers
    black_box.n_answers              queries the system answered in words
    cost.endpoint_latency_p50_ms, cost.endpoint_latency_p95_ms, cost.endpoint_latency_mean_ms
                                  per-query latency of the answered attempt (queries where known)

and warnings naming the passages it could not place and their documents, plus two artifacts:
``system/responses.jsonl`` (the raw responses, what ``ragexp reproduce`` re-scores and
``system=recorded system.response_field=response`` reads) and ``system/placements.jsonl``
(how each passage was placed).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.prepared import PreparedData
from ragexp.evaluation.retrieval_step import Retrieved
from ragexp.metrics.ranking import doc_level
from ragexp.runtime.stage_cache import StageCache
from ragexp.systems.answers import SystemAnswers
from ragexp.systems.build import locate_options, response_fields
from ragexp.systems.fetch import Fetched, fetch_all
from ragexp.systems.locate import HOW_LOCATED, Locator, Placement
from ragexp.systems.located_floor import affected_documents, check_located_floor, named
from ragexp.systems.passage_header import HeaderTemplate
from ragexp.systems.scoring import pooled_qrels, ranked, unit_of

RESPONSES_ARTIFACT = "system/responses.jsonl"
PLACEMENTS_ARTIFACT = "system/placements.jsonl"
NAMED = 10


@dataclass
class SystemRun:
    data: PreparedData
    retrieved: Retrieved
    answers: SystemAnswers | None
    aggregates: dict[str, float]
    per_query: dict[str, dict[str, float]]
    warnings: list[str]
    meta: dict[str, Any]
    artifacts: dict[str, str] = field(default_factory=dict)
    fetched: list[Fetched] = field(default_factory=list)


def fetch_responses(spec: JobSpec, data: PreparedData, system: Any, cache: StageCache) -> tuple[list[Fetched], float]:
    """Every eval query's response (:func:`~ragexp.systems.fetch.fetch_all`) and the seconds it took;
    a job asks before it creates anything in the store, so a failing system leaves nothing behind."""
    started = time.perf_counter()
    node = spec.config.system
    fetched = fetch_all(system, data.evalset.items, cache, use_cache=bool(node.get("cache", True)),
                        deadline_s=node.get("deadline_s"), max_failed_queries=node.get("max_failed_queries"))
    return fetched, time.perf_counter() - started


def system_step(spec: JobSpec, data: PreparedData, system: Any, cache: StageCache,
                responses: tuple[list[Fetched], float] | None = None) -> SystemRun:
    """The black-box run's data and retrieval (module docstring); ``responses``: fetched already."""
    node = spec.block("system")
    items = data.evalset.items
    fetched, fetch_s = responses if responses is not None else fetch_responses(spec, data, system, cache)
    started = time.perf_counter()
    options = locate_options(node)
    template = response_fields(node).template
    locator = Locator(data.corpus, options, template=HeaderTemplate.parse(template) if template else None)
    placed: dict[tuple, Placement] = {}
    per_item_units, per_item_placements = [], []
    for record in fetched:
        units, placements, seen = [], [], Counter()
        for passage in record.answer.passages:
            key = (passage.text, passage.doc_id, passage.path)
            if key not in placed:
                placed[key] = locator.locate(passage.text, passage.doc_id, passage.path)
            placements.append(placed[key])
            seen[key] += 1
            units.append(unit_of(passage, placed[key], data.corpus, occurrence=seen[key]))
        per_item_units.append(ranked(units))
        per_item_placements.append(placements)
    locate_s = time.perf_counter() - started
    check_located_floor([pair for f, ps in zip(fetched, per_item_placements) for pair in zip(f.answer.passages, ps)],
                        locator, options.min_located_rate)
    pool = list({unit.id: unit for r in per_item_units for unit in r.units}.values())
    qrels, unreturned = pooled_qrels(items, pool, data.corpus, spec.eval.relevance, set(data.not_indexed))
    rankings = [r.ranking() for r in per_item_units]
    new_data = replace(data, chunks=pool, chunk_qrels=qrels, chunking_label=f"system={node['name']}")
    retrieved = Retrieved(rankings=rankings, doc_rankings=[doc_level(r) for r in rankings],
                          depth=max([len(r) for r in rankings] + [1]), from_cache=all(f.cached for f in fetched),
                          timings={"system_s": fetch_s, "locate_s": locate_s})
    answers = [(f.query, f.answer.answer) for f in fetched]
    has_answers = any(a is not None for _, a in answers)
    aggregates, per_query = _counts(fetched, per_item_placements, per_item_units, unreturned)
    warnings = _warnings(fetched, per_item_placements, per_item_units)
    placements_lines = [json.dumps({"query_id": f.query_id, "passages": [
        {"rank": i + 1, **p.to_record()} for i, p in enumerate(ps)]}) for f, ps in zip(fetched, per_item_placements)]
    return SystemRun(
        data=new_data, retrieved=retrieved, answers=SystemAnswers(system.label(), answers) if has_answers else None,
        aggregates=aggregates, per_query=per_query, warnings=warnings,
        meta={"kind": system.kind, "label": system.label(), "identity": system.identity(),
              "responses_from_cache": sum(f.cached for f in fetched)},
        artifacts={RESPONSES_ARTIFACT: "".join(json.dumps(f.to_record()) + "\n" for f in fetched),
                   PLACEMENTS_ARTIFACT: "".join(line + "\n" for line in placements_lines)},
        fetched=fetched,
    )


def _counts(fetched: list[Fetched], placements: list[list[Placement]], units: list, unreturned: int) -> tuple[dict, dict]:
    hows = Counter(p.how for ps in placements for p in ps)
    n = sum(hows.values())
    aggregates = {
        "black_box.n_passages": float(n),
        "black_box.located_rate": sum(hows[h] for h in HOW_LOCATED) / n if n else float("nan"),
        **{f"black_box.located_{h}_rate": hows[h] / n if n else float("nan") for h in HOW_LOCATED},
        "black_box.n_unlocated": float(hows["unlocated"]),
        "black_box.n_ambiguous": float(hows["ambiguous"]),
        "black_box.n_duplicate_passages": float(sum(r.duplicates for r in units)),
        "black_box.n_unreturned_spans": float(unreturned),
        "black_box.n_answers": float(sum(f.answer.answer is not None for f in fetched)),
    }
    latencies = np.array([f.latency_ms for f in fetched if f.latency_ms is not None], dtype=np.float64)
    if latencies.size:
        aggregates["cost.endpoint_latency_p50_ms"] = float(np.percentile(latencies, 50))
        aggregates["cost.endpoint_latency_p95_ms"] = float(np.percentile(latencies, 95))
        aggregates["cost.endpoint_latency_mean_ms"] = float(latencies.mean())
    per_query = {}
    for record, ps in zip(fetched, placements):
        if ps:
            per_query[record.query_id] = {"black_box.located_rate": sum(p.located for p in ps) / len(ps),
                                          "black_box.n_unlocated": float(sum(not p.located for p in ps))}
    return aggregates, per_query


def _warnings(fetched: list[Fetched], placements: list[list[Placement]], units: list) -> list[str]:
    out = []
    unplaced = [(f, rank, passage, p) for f, ps in zip(fetched, placements)
                for rank, (passage, p) in enumerate(zip(f.answer.passages, ps), start=1) if not p.located]
    total = sum(len(ps) for ps in placements)
    if unplaced:
        ambiguous = sum(p.how == "ambiguous" for *_, p in unplaced)
        docs = Counter(p.doc_id or passage.doc_id or passage.path or "(no document given)" for _, _, passage, p in unplaced)
        distinct: dict[tuple[str, str], list[str]] = {}
        for f, rank, passage, p in unplaced:
            distinct.setdefault((passage.text[:60], p.reason), []).append(f"{f.query_id} #{rank}")
        named_texts = "; ".join(f"{text!r} ({reason}; {_listed(where, 5)})"
                                for (text, reason), where in list(distinct.items())[:NAMED])
        more = f" and {len(distinct) - NAMED} more" if len(distinct) > NAMED else ""
        out.append(
            f"{len(unplaced)} of {total} passages the system returned could not be placed in the corpus "
            f"({len(unplaced) - ambiguous} not found, {ambiguous} ambiguous) and count as not relevant; documents: "
            f"{named([f'{d} ({n})' for d, n in docs.most_common()])}; {len(distinct)} distinct: {named_texts}{more} "
            f"(all in the artifact {PLACEMENTS_ARTIFACT}); a stale or foreign index?")
    pairs = [pair for f, ps in zip(fetched, placements) for pair in zip(f.answer.passages, ps)]
    gone, fuzzy = affected_documents(pairs)
    edited = [d for d in fuzzy if d not in gone]
    if unplaced and edited:
        out.append(f"{len(edited)} more documents were placed only fuzzily (edited since the system indexed them?): "
                   f"{named(edited)}")
    duplicates = sum(r.duplicates for r in units)
    if duplicates:
        out.append(f"{duplicates} passages repeated a passage (same place or text) returned earlier for the same "
                   "query and were kept once, at the first rank")
    empty = [f.query_id for f in fetched if not f.answer.passages]
    if empty:
        out.append(f"the system returned no passage for {len(empty)} queries ({', '.join(empty[:NAMED])})")
    return out


def _listed(names: list[str], limit: int) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
