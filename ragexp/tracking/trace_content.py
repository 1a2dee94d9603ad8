"""What one query's MLflow trace holds, built from the run's results alone (no MLflow calls here).

A :class:`QueryTrace` is the content of one eval query's trace in MLflow's span conventions, built
from its :class:`~ragexp.evaluation.results.QueryResult`, its eval-set item and the texts of the
passages (:class:`Passages`), so a run, its reproduction, an upload and an old run get the same
trace. Spans (children of the root, in this order)::

    <query id>      CHAIN      in: {"query"}  out: the answer, else the ids of the top context_k units
      retrieve      RETRIEVER  in: {"query", "depth"}  out: the top :func:`shown_depth` passages as
                               MLflow Documents (no reranker), else no list (the first-stage order
                               is not kept in the results; the rerank span holds the final order)
      rerank        RERANKER   (a reranker ran) in: {"query", "candidates"}  out: the top passages
      generate      LLM        (a generator ran) in: {"query", "context"}  out: the answer
      judge_faithfulness       EVALUATOR (claims judged) out: one verdict per claim
      judge_answer_relevance   EVALUATOR (a question was written back) out: question, score

A passage is ``{"page_content": chunk text, "metadata": {"gold": relevant | judged not relevant |
unjudged, "doc_uri": document id, "chunk_id", "rank", "score", "grade"}, "id": chunk id}`` (gold
first: MLflow shows the first metadata entry beside each passage)
(:func:`gold_status`: the eval set's chunk-level relevance, grade >= 1 relevant, 0 judged not
relevant, absent unjudged). The root span's attributes hold the query's whole record
(``ragexp.metrics``: every per-query metric; ``ragexp.failure_class``, tags, source). The LLM
span carries the generation call's tokens as ``mlflow.chat.tokenUsage`` (:func:`token_usage`)
where the model reported them.

Every text in a span comes from untrusted data (the eval set, the corpus, a system's answers) and
MLflow's trace view renders text as Markdown, so it is made inert first (:func:`inert_markdown`):
no image or HTML element that would load from another host when the trace is opened.

Assessments (:mod:`mlflow.entities`; every one on the trace's root span unless said):

- expectations, source HUMAN (the item's annotator, else the eval set): ``expected_response``
  (gold answer), ``expected_facts`` (key facts), ``expected_retrieved_context`` (the relevant
  gold evidence as ``{"doc_uri", "content"}``: the annotators' relevance calls), and
  ``judged_not_relevant`` (evidence graded 0) where the item has them;
- CODE feedback from ``ragexp``: the retrieval metrics at k (:func:`feedback_metrics`, k = 5
  when evaluated, else the largest k) and ``failure_class`` with the reason in its rationale;
- judge feedback, source LLM_JUDGE for language-model judges and CODE for the lexical and
  embedding judges: ``faithfulness`` (rationale: each claim, its verdict and the evidence
  sentence), one ``claim_<i>`` per judged claim on the faithfulness span (value: supported; a
  judge failure is an error), ``answer_relevance`` (rationale: the question the judge read the
  answer as answering), ``correctness`` (F1; EM and key-fact recall in the rationale).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Expectation, Feedback, SpanType
from mlflow.tracing.constant import SpanAttributeKey, TokenUsageKey

from ragexp.datamodel import Chunk, Corpus, EvalItem, is_relevant
from ragexp.evaluation.results import QueryResult
from ragexp.metrics.measure import at

RELEVANT, NOT_RELEVANT, UNJUDGED = "relevant", "judged not relevant", "unjudged"
#: The per-query retrieval metrics logged as CODE feedback at the headline k (then ``mrr``).
RETRIEVAL_FEEDBACK = ("hit_rate", "recall", "ndcg", "context_precision")
RAGEXP_SOURCE = AssessmentSource(AssessmentSourceType.CODE, "ragexp")
#: Judge kinds (``identity()["kind"]``) that are language models; the others are code.
LLM_JUDGE_KINDS = frozenset({"llm", "local_likelihood"})
CLAIM_PREFIX = "claim_"
#: The trace tag holding the query id (how a run's trace for a query is found).
QUERY_TAG = "ragexp.query_id"
RUN_NAME_TAG = "ragexp.run_name"
FAILURE_TAG = "ragexp.failure_class"


@dataclass(frozen=True)
class Passages:
    """The texts a trace shows: chunks by id (the run's chunking) and the corpus' documents."""

    chunks: Mapping[str, Chunk]
    documents: Corpus | Mapping[str, Any]

    def text(self, unit_id: str) -> str:
        """A chunk's text; a unit that is a whole document (gold in a document without chunks) its text."""
        chunk = self.chunks.get(unit_id)
        if chunk is not None:
            return chunk.text
        document = self.documents.get(unit_id)
        return document.text if document is not None else ""

    def doc_id(self, unit_id: str) -> str:
        chunk = self.chunks.get(unit_id)
        return chunk.doc_id if chunk is not None else unit_id


@dataclass(frozen=True)
class SpanContent:
    name: str
    span_type: str
    inputs: Any
    outputs: Any
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryTrace:
    """One query's trace: the root span's content, its child spans, the trace tags, and the
    assessments (``span_assessments`` go on the child span of that name)."""

    root: SpanContent
    children: tuple[SpanContent, ...]
    tags: dict[str, str]
    assessments: tuple[Feedback | Expectation, ...]
    span_assessments: dict[str, tuple[Feedback, ...]] = field(default_factory=dict)


def gold_status(grade: int | None) -> str:
    """``relevant`` (a relevant grade, :func:`~ragexp.datamodel.is_relevant`), ``judged not relevant``
    (0), ``unjudged`` (no grade)."""
    if grade is None:
        return UNJUDGED
    return RELEVANT if is_relevant(grade) else NOT_RELEVANT


def headline_k(ks: Sequence[int]) -> int:
    """The k the CODE feedback and the outcome are stated at: 5 when evaluated, else the largest."""
    return 5 if 5 in ks else max(ks)


#: Passages a trace shows at most beyond the generator's context (a 100-deep SciFact ranking of
#: abstracts would make every trace 150 KB; the whole ranking stays in ``ragexp_results.json``).
SHOWN = 10


def shown_depth(ks: Sequence[int], context_k: int) -> int:
    """How many ranked passages a trace shows: the largest k, at most :data:`SHOWN`, and never
    fewer than the ``context_k`` a generator is shown."""
    return max(min(max(ks), SHOWN), context_k)


def passages(row: QueryResult, source: Passages, depth: int) -> list[dict]:
    """The first ``depth`` ranked units of ``row`` in MLflow's Document shape (module docstring)."""
    out = []
    for rank, (unit, score) in enumerate(row.ranking[:depth], start=1):
        grade = row.relevant.get(unit)
        metadata = {"gold": gold_status(grade), "doc_uri": source.doc_id(unit), "chunk_id": unit, "rank": rank,
                    "score": score, "grade": grade}
        if row.pages and unit in row.pages:
            metadata["page"] = row.pages[unit]
        out.append({"page_content": source.text(unit), "metadata": metadata, "id": unit})
    return out


def _human(item: EvalItem | None, evalset_name: str) -> AssessmentSource:
    annotator = item.annotator if item is not None and item.annotator else f"eval set {evalset_name or 'evalset'}"
    return AssessmentSource(AssessmentSourceType.HUMAN, annotator)


def _evidence_text(evidence, documents) -> str:
    document = documents.get(evidence.doc_id)
    if document is None:
        return ""
    return document.text[evidence.start:evidence.end] if evidence.is_span else document.text


def expectations(item: EvalItem | None, documents, evalset_name: str) -> list[Expectation]:
    """The item's gold as expectations (module docstring); none for an item not in the eval set."""
    if item is None:
        return []
    source = _human(item, evalset_name)
    out = []
    if item.gold_answer:
        out.append(Expectation("expected_response", item.gold_answer, source=source))
    if item.key_facts:
        out.append(Expectation("expected_facts", list(item.key_facts), source=source))
    for name, relevant in (("expected_retrieved_context", True), ("judged_not_relevant", False)):
        evidence = [{"doc_uri": e.doc_id, "content": _evidence_text(e, documents), "grade": e.grade}
                    for e in item.evidence if e.relevant is relevant]
        if evidence:
            out.append(Expectation(name, evidence, source=source))
    return out


def _outcome_reason(row: QueryResult, context_k: int) -> str:
    if not row.has_gold():
        return "the item has no gold evidence"
    relevant = sum(map(is_relevant, row.relevant.values()))
    if row.first_relevant_rank is None:
        where = f"none of its {relevant} relevant units was retrieved (depth {len(row.ranking)})"
    else:
        where = f"first relevant unit at rank {row.first_relevant_rank} of {relevant} relevant"
    inside = row.first_relevant_rank is not None and row.first_relevant_rank <= context_k
    text = f"{where}; {'within' if inside else 'not within'} the {context_k} passages a generator is shown"
    scores = [f"{name} {row.metrics[name]:.3g}" for name in ("f1", "key_fact_recall", "faithfulness") if name in row.metrics]
    if row.answer is not None:
        text += "; answer: " + (", ".join(scores) if scores else "not scored")
    if row.generation_error:
        text += f"; generation failed: {row.generation_error}"
    return text


def feedback_metrics(k: int) -> list[str]:
    """The keys :func:`retrieval_feedback` logs at headline cutoff ``k``: :data:`RETRIEVAL_FEEDBACK` at ``k``, ``mrr``."""
    return [at(name, k) for name in RETRIEVAL_FEEDBACK] + ["mrr"]


def retrieval_feedback(row: QueryResult, ks: Sequence[int], context_k: int) -> list[Feedback]:
    """The query's retrieval metrics at the headline k and its failure class, as CODE feedback."""
    out = [Feedback(name, row.metrics[name], source=RAGEXP_SOURCE)
           for name in feedback_metrics(headline_k(ks)) if name in row.metrics]
    out.append(Feedback("failure_class", row.outcome_class(context_k), source=RAGEXP_SOURCE,
                        rationale=_outcome_reason(row, context_k)))
    return out


def judge_source(judge: Mapping[str, Any] | None) -> AssessmentSource:
    """LLM_JUDGE for a language-model judge, CODE for the lexical and embedding judges; the
    source id names the judge kind and model (``lexical:lexical``, ``llm:gpt-4o``)."""
    identity = (judge or {}).get("identity") or {}
    kind = str(identity.get("kind", "judge"))
    kind_type = AssessmentSourceType.LLM_JUDGE if kind in LLM_JUDGE_KINDS else AssessmentSourceType.CODE
    return AssessmentSource(kind_type, f"{kind}:{identity.get('model_id', '')}")


def _evidence_sentence(verdict, context: str) -> str:
    if verdict.evidence is None or len(verdict.evidence) != 2:
        return ""
    start, end = verdict.evidence
    return context[start:end] if 0 <= start <= end <= len(context) else ""


def _verdict_word(supported: bool | None) -> str:
    return {True: "supported", False: "not supported", None: "judge failed"}[supported]


def claim_verdicts(row: QueryResult) -> list[dict]:
    """The judge span's output: each claim with its verdict, score and evidence sentence."""
    context = row.judge_context or ""
    return [{"claim": v.claim, "supported": v.supported, "score": v.score, "evidence": _evidence_sentence(v, context),
             **({"error": v.error} if v.error else {})} for v in row.claims or ()]


def judge_feedback(row: QueryResult, judge: Mapping[str, Any] | None) -> tuple[list[Feedback], list[Feedback]]:
    """``(trace feedback, per-claim feedback for the faithfulness span)`` from the judge's verdicts
    and the correctness scores (module docstring)."""
    source = judge_source(judge)
    trace: list[Feedback] = []
    claims: list[Feedback] = []
    if row.claims is not None:
        lines = [f"{'✓' if c['supported'] else '✗' if c['supported'] is False else '?'} {c['claim']}"
                 + (f" — evidence: {c['evidence']!r}" if c["evidence"] else "") for c in claim_verdicts(row)]
        rationale = "\n".join(lines) or (row.faithfulness_undefined or "no claims")
        if "faithfulness" in row.metrics:
            trace.append(Feedback("faithfulness", row.metrics["faithfulness"], source=source, rationale=rationale))
        else:
            trace.append(Feedback("faithfulness", error=AssessmentError("UNDEFINED", row.faithfulness_undefined or "undefined"),
                                  source=source, rationale=rationale))
        for index, (verdict, shown) in enumerate(zip(row.claims, claim_verdicts(row))):
            why = f"{verdict.claim}" + (f" — evidence: {shown['evidence']!r}" if shown["evidence"] else "")
            if verdict.supported is None:
                claims.append(Feedback(f"{CLAIM_PREFIX}{index}", error=AssessmentError("JUDGE_FAILED", verdict.error or "no verdict"),
                                       source=source, rationale=why))
            else:
                claims.append(Feedback(f"{CLAIM_PREFIX}{index}", verdict.supported, source=source, rationale=why))
    if "answer_relevance" in row.metrics:
        trace.append(Feedback("answer_relevance", row.metrics["answer_relevance"], source=source,
                              rationale=f"the judge read the answer as answering: {row.generated_question!r}"))
    if "f1" in row.metrics:
        parts = [f"{name} {row.metrics[name]:.3g}" for name in ("exact_match", "f1", "key_fact_recall") if name in row.metrics]
        trace.append(Feedback("correctness", row.metrics["f1"], source=RAGEXP_SOURCE,
                              rationale="against the gold answer: " + ", ".join(parts)))
    return trace, claims


def token_usage(row: QueryResult) -> dict[str, Any]:
    """The generation call's tokens as MLflow's ``mlflow.chat.tokenUsage`` span attribute (the
    trace's token count in the GenAI pages); empty when the model reported none."""
    if row.prompt_tokens is None and row.completion_tokens is None:
        return {}
    prompt, completion = row.prompt_tokens or 0, row.completion_tokens or 0
    return {SpanAttributeKey.CHAT_USAGE: {TokenUsageKey.INPUT_TOKENS: prompt, TokenUsageKey.OUTPUT_TOKENS: completion,
                                          TokenUsageKey.TOTAL_TOKENS: prompt + completion}}


#: Markdown's image syntax, and the HTML elements that fetch a URL when rendered.
_REMOTE_CONTENT = re.compile(r"!(?=\[)|<(?=/?\s*(?:img|image|picture|source|video|audio|svg|iframe|frame|object|embed|"
                             r"link|input|use|track|body|table|style|meta|base)\b)", re.IGNORECASE)


def inert_markdown(text: str) -> str:
    """``text`` with nothing Markdown would load from elsewhere: the ``!`` of ``![alt](url)`` becomes
    ``&#33;`` (then a link, followed only when clicked) and the ``<`` of ``<img ...>`` (of any
    element that fetches a URL) ``&lt;`` (shown as text). Character references, not backslashes:
    a backslash before them would escape the escape. Everything else is unchanged."""
    return _REMOTE_CONTENT.sub(lambda match: "&#33;" if match.group() == "!" else "&lt;", text)


def inert(value: Any) -> Any:
    """``value`` with :func:`inert_markdown` applied to every string in it (dicts, lists)."""
    if isinstance(value, str):
        return inert_markdown(value)
    if isinstance(value, Mapping):
        return {key: inert(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [inert(item) for item in value]
    return value


def _inert_span(span: SpanContent) -> SpanContent:
    return SpanContent(span.name, span.span_type, inert(span.inputs), inert(span.outputs), inert(span.attributes))


def query_trace(row: QueryResult, item: EvalItem | None, source: Passages, meta: Mapping[str, Any],
                run_name: str, *, reranked: bool, evalset_name: str = "") -> QueryTrace:
    """The trace of one query of a run (module docstring). ``meta``: the results' ``meta``
    (``ks``, ``context_k``, ``judge``); ``reranked``: whether the run's pipeline reranked."""
    ks = list(meta["ks"])
    context_k = int(meta.get("context_k") or max(ks))
    shown = passages(row, source, shown_depth(ks, context_k))
    failure = row.outcome_class(context_k)
    children = []
    if reranked:
        children.append(SpanContent("retrieve", SpanType.RETRIEVER, {"query": row.query, "depth": len(row.ranking)},
                                    {"candidates": len(row.ranking),
                                     "note": "the first-stage order is not kept; the rerank span has the final order"}))
        children.append(SpanContent("rerank", SpanType.RERANKER, {"query": row.query, "candidates": len(row.ranking)}, shown))
    else:
        children.append(SpanContent("retrieve", SpanType.RETRIEVER, {"query": row.query, "depth": len(row.ranking)}, shown))
    if row.answer is not None or row.generation_error:
        children.append(SpanContent("generate", SpanType.LLM, {"query": row.query, "context": row.judge_context or ""},
                                    row.answer or "", {"ragexp.generation_error": row.generation_error or "",
                                                       **token_usage(row)}))
    span_assessments: dict[str, tuple[Feedback, ...]] = {}
    trace_feedback, claim_feedback = judge_feedback(row, meta.get("judge"))
    if row.claims is not None:
        children.append(SpanContent("judge_faithfulness", SpanType.EVALUATOR,
                                    {"answer": row.answer or "", "context": row.judge_context or ""}, claim_verdicts(row)))
        span_assessments["judge_faithfulness"] = tuple(claim_feedback)
    if row.generated_question is not None:
        children.append(SpanContent("judge_answer_relevance", SpanType.EVALUATOR, {"answer": row.answer or ""},
                                    {"generated_question": row.generated_question,
                                     "answer_relevance": row.metrics.get("answer_relevance")}))
    output = row.answer if row.answer is not None else {f"top_{context_k}": row.top_ids(context_k)}
    root = SpanContent(row.query_id, SpanType.CHAIN, {"query": row.query}, output, {
        "ragexp.query_id": row.query_id, "ragexp.tags": list(row.tags), "ragexp.source": row.source or "",
        "ragexp.answerable": row.answerable, "ragexp.failure_class": failure,
        "ragexp.first_relevant_rank": row.first_relevant_rank, "ragexp.metrics": dict(row.metrics),
    })
    tags = {QUERY_TAG: row.query_id, RUN_NAME_TAG: run_name, FAILURE_TAG: failure}
    assessments = (*expectations(item, source.documents, evalset_name), *retrieval_feedback(row, ks, context_k),
                   *trace_feedback)
    return QueryTrace(_inert_span(root), tuple(_inert_span(child) for child in children), tags, assessments,
                      span_assessments)
