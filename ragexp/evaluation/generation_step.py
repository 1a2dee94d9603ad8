"""Generation and judging for one run, scored apart from retrieval.

For every eval item the generator sees the first ``eval.context_k`` retrieved chunks; the answer is
scored for faithfulness (claims judged against exactly that context), answer relevance (the
judge's reconstructed question vs the query, by embedding cosine), correctness against the gold
(SQuAD EM/F1, key-fact recall, refusals) and gets a failure class: ``retrieval_failure`` when no
gold chunk reached the generator, ``generation_failure`` when it did and the answer is still
wrong or unfaithful, ``ok``; ``unanswerable_ok`` / ``hallucinated`` for unanswerable items.
Lines of an answer that copy a context label line (``[1] Refund policy > Annual plans``) or a section
title (``1. Annual plans``) are taken out before anything reads it (:func:`~ragexp.data.context.strip_label_copies`): they are ragexp's
labels, not claims about the documents. ``gen.label_copies`` counts the answers that had one,
``gen.degenerate_answers`` the answers that degenerated into list markers or one token over and
over (:func:`~ragexp.llm.answer_end.degeneration_start`, on the answer as kept: a local model's stop
cuts it there first, ``gen.degenerate_stopped``).
Judge verdicts are cached by (judge config, query, answer, context), so a new judge never
re-generates and a re-run never re-judges.

Items go through in rounds of :data:`ROUND` questions: the round's answers are generated in one
batch call (``generator.generate_batch`` where the generator has it), then all their claims are
judged in one call and all their relevance questions written in one call, so local models work
on batches instead of single prompts. The ``generate+judge`` bar counts answered questions: a
local model moves it as each answer's row of a decoded batch ends
(:func:`ragexp.runtime.progress.ticking`), other generators once their round is answered; it says
``judging N answers`` while the round is judged. Speed is reported by
:mod:`ragexp.evaluation.generation_speed`; ``gen.threads`` is the torch thread count that local
models set (:mod:`ragexp.runtime.threads`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ragexp.config.schema import component_config
from ragexp.data.context import COPY_RULES_VERSION, format_context, strip_label_copies
from ragexp.evaluation.generation_speed import speed_metrics
from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.pipeline import Pipeline
from ragexp.evaluation.prepared import PreparedData
from ragexp.evaluation.results import QueryResult
from ragexp.judging.answer_relevance import (
    AnswerRelevanceResult,
    aggregate_answer_relevance,
    answer_relevance_batch,
)
from ragexp.judging.correctness import correctness_metrics
from ragexp.judging.failure import (
    FailureClass,
    classify,
    failure_rates,
    gold_in_context,
)
from ragexp.judging.faithfulness import (
    FaithfulnessResult,
    Verdict,
    aggregate_faithfulness,
    faithfulness_batch,
)
from ragexp.judging.judges import warn_if_self_judging
from ragexp.llm.answer_end import degeneration_start, most_repeated_sentence
from ragexp.llm.usage import TokenUsage, metered
from ragexp.metrics.per_tag import per_source_means, per_tag_means
from ragexp.runtime import progress
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.threads import configured_threads

log = logging.getLogger(__name__)

GENERATION_METRICS = ("faithfulness", "answer_relevance", "exact_match", "f1", "key_fact_recall", "refused")
REPEATING = 3
"""``gen.repeating_answers`` counts answers whose most frequent sentence occurs this often."""
ROUND = 32
"""Questions generated, then judged, together (4 local-model batches of 8)."""


def _judge_records(
    judge: Any, judge_key: dict | None, requests: Sequence[tuple[str, str, str]], encode, cache: StageCache,
    usage: TokenUsage | None = None,
) -> list[dict]:
    """Faithfulness and relevance records for each ``(query, answer, context)``, the uncached
    ones judged in one batch; a record is cached only when none of its judge calls failed (a
    failure is counted for this run and retried by the next, never stored as a verdict). The
    tokens of the judge calls go to ``usage``, which counts the records judged here as its queries."""
    keys = [{"judge": judge_key, "query": q, "answer": a, "context": c} for q, a, c in requests]
    records = [cache.get_json("judge", key) for key in keys]
    todo = [i for i, record in enumerate(records) if record is None]
    if not todo:
        return records
    with metered(usage) as counted:
        counted.queries += len(todo)
        return _judge_todo(judge, records, todo, requests, keys, encode, cache)


def _judge_todo(judge: Any, records: list, todo: list[int], requests: Sequence[tuple[str, str, str]], keys: list[dict],
                encode, cache: StageCache) -> list[dict]:
    """``records`` with the ``todo`` ones judged in one batch (:func:`_judge_records`)."""
    faiths = faithfulness_batch([(requests[i][1], requests[i][2]) for i in todo], judge)
    relevances = answer_relevance_batch([requests[i][0] for i in todo], [requests[i][1] for i in todo], judge, encode)
    for i, faith, relevance in zip(todo, faiths, relevances):
        records[i] = {
            "faithfulness": {"score": faith.score, "undefined_reason": faith.undefined_reason,
                             "verdicts": [v.to_dict() for v in faith.verdicts]},
            "relevance": {"score": relevance.score, **relevance.to_record()},
        }  # fmt: skip
        if not faith.judge_failures and not relevance.error:
            cache.put_json("judge", keys[i], records[i])
    return records


def _generate_all(generator: Any, requests: list[tuple[str, list]]) -> list:
    """``generator.generate_batch(requests)`` where it exists, else one ``generate`` per request."""
    batch = getattr(generator, "generate_batch", None)
    if batch is not None:
        return batch(requests)
    return [generator.generate(query, contexts) for query, contexts in requests]


def generation_tokens(generation: Any) -> dict[str, int]:
    """``prompt_tokens`` / ``completion_tokens`` of one answer, where its model reported them (a
    black box's answer or a failed call has none)."""
    prompt, completion = getattr(generation, "prompt_tokens", 0), getattr(generation, "completion_tokens", 0)
    return {"prompt_tokens": int(prompt), "completion_tokens": int(completion)} if prompt or completion else {}


def _faithfulness_from(record: dict, context: str) -> FaithfulnessResult:
    verdicts = [Verdict(**v) for v in record["verdicts"]]
    return FaithfulnessResult(record["score"], verdicts, record["undefined_reason"], context)


def generation_step(
    spec: JobSpec, data: PreparedData, pipeline: Pipeline, per_query: Sequence[QueryResult], cache: StageCache,
    usage: Mapping[str, TokenUsage] | None = None,
) -> tuple[dict[str, float], list[QueryResult]]:
    """Generate, judge and classify every item: the aggregates, and each retrieval-only
    per-query record completed with its answer, verdicts, scores and failure class.
    Uses the pipeline's generator, its judge (or none) and its relevance encoder. ``usage``:
    ``{"generation": ..., "judging": ...}`` meters (:mod:`ragexp.llm.usage`) the model calls'
    tokens go to (:mod:`ragexp.cost.tokens` reads them)."""
    usage = usage or {}
    from tqdm import tqdm

    generator, judge = pipeline.generator, pipeline.judge
    # the threshold in force: a calibration file rewritten under the same path changes verdicts
    cfg = spec.config
    judge_key = {"config": component_config(cfg.get("judge")), "threshold": getattr(judge, "threshold", None),
                 "copy_rules": COPY_RULES_VERSION}
    generator_id = getattr(generator, "params", {}).get("model_id") if hasattr(generator, "params") else None
    if judge is not None:
        warn_if_self_judging(judge.model_id, generator_id)
    encode = pipeline.encoder.encode_queries if pipeline.encoder is not None else None
    thresholds = spec.eval.failure
    chunks_by_id = data.chunks_by_id
    faith_results, relevance_results, classes, generations, rows = [], [], [], [], []
    generate_s = judge_s = 0.0
    label_copies = 0
    items = data.evalset.items
    with tqdm(total=len(items), desc="generate+judge", unit="q", disable=not cfg.progress) as bar:
        for start in range(0, len(items), ROUND):
            round_items, round_rows = items[start : start + ROUND], per_query[start : start + ROUND]
            contexts = [[chunks_by_id[cid] for cid in row.top_ids(spec.eval.context_k)] for row in round_rows]
            t0 = time.perf_counter()
            with metered(usage.get("generation")) as counted, progress.ticking(bar.update):
                counted.queries += len(round_items)
                round_generations = _generate_all(generator, [(item.query, ctx) for item, ctx in zip(round_items, contexts)])
            generate_s += time.perf_counter() - t0
            bar.update(start + len(round_items) - bar.n)  # answers no model ticked (cached, a remote or extractive generator)
            bar.set_postfix_str(f"judging {len(round_items)} answers" if judge is not None else "")
            context_texts = [format_context(ctx) for ctx in contexts]
            stripped = [strip_label_copies(g.answer, text) for g, text in zip(round_generations, context_texts)]
            round_generations = [replace(g, answer=answer) if removed else g
                                 for g, (answer, removed) in zip(round_generations, stripped)]
            label_copies += sum(removed > 0 for _, removed in stripped)
            generations.extend(round_generations)
            judged = [i for i, g in enumerate(round_generations) if not g.error] if judge is not None else []
            t0 = time.perf_counter()
            records = _judge_records(
                judge, judge_key, [(round_items[i].query, round_generations[i].answer, context_texts[i]) for i in judged],
                encode, cache, usage.get("judging"),
            )  # fmt: skip
            judge_s += time.perf_counter() - t0
            record_of = dict(zip(judged, records))
            for i, (item, row, generation) in enumerate(zip(round_items, round_rows, round_generations)):
                fields: dict[str, Any] = {"answer": generation.answer, "generation_error": generation.error or None,
                                          "label_lines_removed": stripped[i][1], **generation_tokens(generation)}
                # A failed call has no answer: no correctness, judging or refusal is read into it.
                scores = {} if generation.error else correctness_metrics(generation.answer, item.reference_answers, item.key_facts)
                faith = None
                if i in record_of:
                    faith = _faithfulness_from(record_of[i]["faithfulness"], context_texts[i])
                    relevance = AnswerRelevanceResult(**record_of[i]["relevance"])
                    faith_results.append(faith)
                    relevance_results.append(relevance)
                    fields.update(faith.to_record(), claims=tuple(faith.verdicts))  # the verdicts typed
                    if relevance.generated_question:
                        fields["generated_question"] = relevance.generated_question
                    if faith.score is not None:
                        scores["faithfulness"] = faith.score
                    if relevance.score is not None:
                        scores["answer_relevance"] = relevance.score
                context_ids = list(generation.context_ids) or [c.id for c in contexts[i]]
                failure = classify(
                    answerable=item.answerable,
                    refused=bool(scores.get("refused")),
                    gold_in_context=gold_in_context(context_ids, row.relevant),
                    f1=scores.get("f1"),
                    key_fact_recall=scores.get("key_fact_recall"),
                    faithfulness=faith.score if faith is not None else None,
                    thresholds=thresholds,
                    generation_failed=bool(generation.error),
                )
                classes.append(failure)
                rows.append(replace(row, **fields, failure_class=failure.value, metrics={**row.metrics, **scores}))
            bar.set_postfix_str("")

    answerable_rows = [r for r, item in zip(rows, items) if item.answerable]
    aggregates: dict[str, float] = {}
    for name in ("exact_match", "f1", "key_fact_recall"):
        values = [r.metrics[name] for r in answerable_rows if name in r.metrics]
        if values:
            aggregates[name] = sum(values) / len(values)
    unanswerable = [c for c in classes if c in (FailureClass.UNANSWERABLE_OK, FailureClass.HALLUCINATED)]
    if unanswerable:
        aggregates["refusal_accuracy"] = sum(c == FailureClass.UNANSWERABLE_OK for c in unanswerable) / len(unanswerable)
    aggregates.update(failure_rates(classes))
    if judge is not None:
        aggregates.update(aggregate_faithfulness(faith_results))
        aggregates.update(aggregate_answer_relevance(relevance_results))
    aggregates["generation_errors"] = float(sum(bool(g.error) for g in generations))
    aggregates["gen.prompt_tokens"] = float(sum(g.prompt_tokens for g in generations))
    aggregates["gen.completion_tokens"] = float(sum(g.completion_tokens for g in generations))
    aggregates["gen.repeating_answers"] = float(
        sum(most_repeated_sentence(g.answer) >= REPEATING for g in generations if not g.error)
    )
    aggregates["gen.label_copies"] = float(label_copies)
    aggregates["gen.degenerate_answers"] = float(
        sum(degeneration_start(g.answer + " ") is not None for g in generations if not g.error)
    )
    aggregates.update(speed_metrics(generations))
    aggregates["gen.generate_wall_s"] = generate_s
    if judge is not None:
        aggregates["gen.judge_wall_s"] = judge_s
    threads = configured_threads()
    if threads is not None:
        aggregates["gen.threads"] = float(threads)
    generation_metrics = {
        row.query_id: {k: v for k, v in row.metrics.items() if k in GENERATION_METRICS} for row in rows
    }
    aggregates.update(per_tag_means(generation_metrics, {item.id: item.tags for item in items}))
    aggregates.update(per_source_means(generation_metrics, items))
    return aggregates, rows
