"""Generation and judging for one run, scored apart from retrieval.

For every eval item the generator sees the first ``context_k`` retrieved chunks; the answer is
scored for faithfulness (claims judged against exactly that context), answer relevance (the
judge's reconstructed question vs the query, by embedding cosine), correctness against the gold
(SQuAD EM/F1, key-fact recall, refusals) and gets a failure class: ``retrieval_failure`` when no
gold chunk reached the generator, ``generation_failure`` when it did and the answer is still
wrong or unfaithful, ``ok``; ``unanswerable_ok`` / ``hallucinated`` for unanswerable items.
Judge verdicts are cached by (judge config, query, answer, context), so a new judge never
re-generates and a re-run never re-judges.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragexp.cache import StageCache
from ragexp.config import component_config
from ragexp.evaluation.runner import PreparedData, per_tag_means
from ragexp.judging.answer_relevance import AnswerRelevanceResult, aggregate_answer_relevance, answer_relevance
from ragexp.judging.correctness import correctness_metrics
from ragexp.judging.failure import FailureClass, FailureThresholds, classify, failure_rates, gold_in_context
from ragexp.judging.faithfulness import FaithfulnessResult, Verdict, aggregate_faithfulness, faithfulness
from ragexp.judging.judges import warn_if_self_judging

log = logging.getLogger(__name__)

GENERATION_METRICS = ("faithfulness", "answer_relevance", "exact_match", "f1", "key_fact_recall", "refused")


def _judge_records(judge: Any, judge_key: dict | None, query: str, answer: str, context: str, encode, cache: StageCache) -> dict:
    """Faithfulness and relevance records for one answer; cached only when no judge call failed
    (a failure is counted for this run and retried by the next, never stored as a verdict)."""
    key = {"judge": judge_key, "query": query, "answer": answer, "context": context}
    record = cache.get_json("judge", key)
    if record is not None:
        return record
    faith = faithfulness(answer, context, judge)
    relevance = answer_relevance(query, answer, judge, encode)
    record = {
        "faithfulness": {"score": faith.score, "undefined_reason": faith.undefined_reason,
                         "verdicts": [v.to_dict() for v in faith.verdicts]},
        "relevance": {"score": relevance.score, **relevance.to_record()},
    }
    if not faith.judge_failures and not relevance.error:
        cache.put_json("judge", key, record)
    return record


def _faithfulness_from(record: dict, context: str) -> FaithfulnessResult:
    verdicts = [Verdict(**v) for v in record["verdicts"]]
    return FaithfulnessResult(record["score"], verdicts, record["undefined_reason"], context)


def generation_step(
    cfg: DictConfig, data: PreparedData, generator: Any, per_query: Sequence[dict], cache: StageCache,
    judge: Any | None,
) -> dict[str, float]:
    """Generate, judge and classify every item; fills each per-query row, returns aggregates.
    ``judge`` is the built ``cfg.judge`` (:func:`~ragexp.evaluation.runner.build_pipeline`), or ``None``."""
    from tqdm import tqdm

    from reference_pipelines.encoders import build_encoder
    from reference_pipelines.generators.base import format_context

    judge_key = component_config(cfg.get("judge"))
    generator_id = getattr(generator, "params", {}).get("model_id") if hasattr(generator, "params") else None
    if judge is not None:
        warn_if_self_judging(judge.model_id, generator_id)
    encoder = build_encoder(OmegaConf.to_container(cfg.embedding, resolve=True)) if cfg.get("embedding") else None
    encode = encoder.encode_queries if encoder is not None else None
    thresholds = FailureThresholds(**OmegaConf.to_container(cfg.eval.failure))
    chunks_by_id = data.chunks_by_id
    faith_results, relevance_results, classes = [], [], []
    generation_errors = prompt_tokens = completion_tokens = 0
    latency = 0.0
    items = data.evalset.items
    for item, row in tqdm(list(zip(items, per_query)), desc="generate+judge", unit="q", disable=not cfg.progress):
        contexts = [chunks_by_id[cid] for cid, _ in row["ranking"][: generator.context_k]]
        generation = generator.generate(item.query, contexts)
        context_text = format_context(contexts)
        row["answer"] = generation.answer
        prompt_tokens += generation.prompt_tokens
        completion_tokens += generation.completion_tokens
        latency += generation.latency_s
        if generation.error:
            generation_errors += 1
            row["generation_error"] = generation.error
        # A failed call has no answer: no correctness, judging or refusal is read into it.
        scores = {} if generation.error else correctness_metrics(generation.answer, item.reference_answers, item.key_facts)
        faith = None
        if judge is not None and not generation.error:
            record = _judge_records(judge, judge_key, item.query, generation.answer, context_text, encode, cache)
            faith = _faithfulness_from(record["faithfulness"], context_text)
            relevance = AnswerRelevanceResult(**record["relevance"])
            faith_results.append(faith)
            relevance_results.append(relevance)
            row.update(faith.to_record())
            if relevance.generated_question:
                row["generated_question"] = relevance.generated_question
            if faith.score is not None:
                scores["faithfulness"] = faith.score
            if relevance.score is not None:
                scores["answer_relevance"] = relevance.score
        context_ids = list(generation.context_ids) or [c.id for c in contexts]
        failure = classify(
            answerable=item.answerable,
            refused=bool(scores.get("refused")),
            gold_in_context=gold_in_context(context_ids, row["relevant"]),
            f1=scores.get("f1"),
            key_fact_recall=scores.get("key_fact_recall"),
            faithfulness=faith.score if faith is not None else None,
            thresholds=thresholds,
            generation_failed=bool(generation.error),
        )
        classes.append(failure)
        row["failure_class"] = failure.value
        row["metrics"].update(scores)

    answerable_rows = [r for r, item in zip(per_query, items) if item.answerable]
    aggregates: dict[str, float] = {}
    for name in ("exact_match", "f1", "key_fact_recall"):
        values = [r["metrics"][name] for r in answerable_rows if name in r["metrics"]]
        if values:
            aggregates[name] = sum(values) / len(values)
    unanswerable = [c for c in classes if c in (FailureClass.UNANSWERABLE_OK, FailureClass.HALLUCINATED)]
    if unanswerable:
        aggregates["refusal_accuracy"] = sum(c == FailureClass.UNANSWERABLE_OK for c in unanswerable) / len(unanswerable)
    aggregates.update(failure_rates(classes))
    if judge is not None:
        aggregates.update(aggregate_faithfulness(faith_results))
        aggregates.update(aggregate_answer_relevance(relevance_results))
    aggregates["generation_errors"] = float(generation_errors)
    aggregates["gen.prompt_tokens"] = float(prompt_tokens)
    aggregates["gen.completion_tokens"] = float(completion_tokens)
    if latency > 0 and completion_tokens:
        aggregates["gen.tokens_per_s"] = completion_tokens / latency
    generation_metrics = {
        row["query_id"]: {k: v for k, v in row["metrics"].items() if k in GENERATION_METRICS} for row in per_query
    }
    aggregates.update(per_tag_means(generation_metrics, {item.id: item.tags for item in items}))
    return aggregates
