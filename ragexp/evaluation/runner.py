"""One evaluated run, from resolved config to :class:`RunResults`; no MLflow here.

Data flow: dataset -> chunks (with offsets) -> relevance per chunk from the gold evidence ->
retrieval once at the largest depth needed -> optional reranking -> retrieval metrics at every
k, chunk-level and document-level (``doc_``), overall and per tag -> optional generation and
judging -> per-query records. Every expensive stage goes through the stage cache, keyed by
exactly what determines it, so a sweep pays once per distinct piece of work.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from ragexp import __version__
from ragexp.cache import StageCache
from ragexp.chunking import make_chunker
from ragexp.config import chunker_options, component_config, validate
from ragexp.data import Chunk, Corpus, EvalSet
from ragexp.data.dataset import load_dataset
from ragexp.errors import RagexpInputError
from ragexp.evaluation.results import RunResults
from ragexp.fingerprint import stable_hash
from ragexp.metrics.evaluate import evaluate_run
from ragexp.metrics.ranking import doc_level, trec_order
from ragexp.relevance import OverlapRule, chunk_qrels, doc_qrels
from ragexp.stats import mean_ci

log = logging.getLogger(__name__)

#: Config keys that change how a run is tracked or displayed, not what it computes.
NON_SEMANTIC_KEYS = ("tracking", "progress", "resume", "cache_dir")
#: Metrics that get a bootstrap 95% CI on every run.
CI_METRICS = ("hit_rate_at_{k}", "recall_at_{k}", "context_precision_at_{k}", "ndcg_at_{k}", "mrr")


@dataclass
class PreparedData:
    """The dataset, chunked, with relevance derived for this chunking; fixed for a run."""

    corpus: Corpus
    evalset: EvalSet
    chunks: list[Chunk]
    chunk_qrels: dict[str, dict[str, int]]
    doc_qrels: dict[str, dict[str, int]]
    chunking_label: str
    chunking_config: dict

    @property
    def chunks_by_id(self) -> dict[str, Chunk]:
        return {chunk.id: chunk for chunk in self.chunks}


@dataclass
class RunOutput:
    results: RunResults
    run_name: str
    config_hash: str
    timings: dict[str, float] = field(default_factory=dict)


def semantic_config(cfg: DictConfig) -> dict:
    """The resolved config minus keys that do not change results (hashing and reproduce use it)."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in NON_SEMANTIC_KEYS:
        data.pop(key, None)
    return data


def config_hash(cfg: DictConfig, data: PreparedData) -> str:
    """Identity of a run's work: semantic config + corpus and eval-set fingerprints."""
    return stable_hash(
        {"config": semantic_config(cfg), "corpus": data.corpus.fingerprint(), "evalset": data.evalset.fingerprint()}
    )


def prepare_data(cfg: DictConfig, cache: StageCache, progress: bool = True) -> PreparedData:
    """Load the dataset, chunk it (cached) and derive chunk- and document-level qrels."""
    corpus, evalset = load_dataset(cfg.dataset)
    if cfg.eval.get("sample") is not None:
        evalset = sample_evalset(evalset, cfg.eval.sample, cfg.eval.get("sample_seed", 0))
    chunker = make_chunker(chunker_options(cfg.chunking))
    key = {"corpus": corpus.fingerprint(), "chunking": chunker.config}
    rows = cache.get_or_compute_json(
        "chunks", key, lambda: [_chunk_row(c) for c in chunker.chunk_corpus(corpus, progress=progress)]
    )
    chunks = [Chunk(**row) for row in rows]
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_doc[chunk.doc_id].append(chunk)
    rule = OverlapRule(min_fraction=cfg.eval.relevance.min_fraction, mode=cfg.eval.relevance.mode)
    return PreparedData(
        corpus=corpus,
        evalset=evalset,
        chunks=chunks,
        chunk_qrels=chunk_qrels(evalset.items, by_doc, rule),
        doc_qrels=doc_qrels(evalset.items),
        chunking_label=chunker.describe(),
        chunking_config=chunker.config,
    )


def sample_evalset(evalset: EvalSet, size: int, seed: int) -> EvalSet:
    """``size`` items drawn without replacement (numpy seed ``seed``), kept in eval-set order;
    the whole set when ``size`` >= its length."""
    if size >= len(evalset.items):
        return evalset
    picked = sorted(np.random.default_rng(seed).choice(len(evalset.items), size=size, replace=False))
    meta = {**evalset.meta, "sampled": {"size": size, "of": len(evalset.items), "seed": seed}}
    return EvalSet([evalset.items[i] for i in picked], source=evalset.source, name=evalset.name, meta=meta)


def _chunk_row(chunk: Chunk) -> dict:
    return {
        "id": chunk.id, "doc_id": chunk.doc_id, "index": chunk.index, "start": chunk.start,
        "end": chunk.end, "text": chunk.text, "title": chunk.title,
    }


def build_component(node: DictConfig | None, group: str, cache: StageCache) -> Any | None:
    """Instantiate a pipeline group's ``_target_``; pass the stage cache when it takes one.

    A wrong parameter name or type fails here, at start-up, naming the config group.
    """
    spec = component_config(node)
    if spec is None:
        return None
    target = spec["_target_"]
    try:
        cls = get_class(target)
    except Exception as err:
        raise RagexpInputError(f"cannot import {target!r}: {err}", field=f"{group}._target_") from None
    kwargs: dict[str, Any] = {"_convert_": "all"}
    if "cache" in inspect.signature(cls).parameters:
        kwargs["cache"] = cache
    try:
        return instantiate(spec, **kwargs)
    except Exception as err:
        # Hydra wraps the constructor's exception in InstantiationException; the cause names the field.
        cause = err if isinstance(err, RagexpInputError) else (err.__cause__ or err)
        if not isinstance(cause, RagexpInputError):
            raise RagexpInputError(f"cannot build {target}: {cause}", field=group) from None
        field = cause.field or group
        if not field.startswith(f"{group}.") and field != group:
            field = f"{group}.{field}"
        raise RagexpInputError(cause.message, file=cause.file, line=cause.line, field=field) from None


class _RetrieveAdapter:
    """Wraps a user's pipeline exposing only the method article's ``retrieve(query) -> [ids]``."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    def index(self, chunks: Sequence[Chunk]) -> None:
        if hasattr(self.pipeline, "index"):
            self.pipeline.index(chunks)

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        out = []
        for query in queries:
            ids = list(self.pipeline.retrieve(query))[:k]
            out.append([(chunk_id, float(len(ids) - rank)) for rank, chunk_id in enumerate(ids)])
        return out


def retrieval_depth(cfg: DictConfig, reranker: Any | None, generator: Any | None) -> int:
    """Retrieve once, at the largest depth any consumer needs; every smaller k is a slice."""
    depth = max([*cfg.eval.ks, cfg.eval.retrieve_k])
    for component in (reranker, generator):
        for attribute in ("top_n", "context_k"):
            depth = max(depth, int(getattr(component, attribute, 0) or 0))
    return depth


def retrieve(
    cfg: DictConfig, data: PreparedData, retriever: Any, depth: int, cache: StageCache
) -> tuple[list[list[tuple[str, float]]], bool]:
    """Rankings for every eval query (cached by retriever config, chunking, corpus, queries, depth).

    Returns ``(rankings, from_cache)``; the index is built only on a cache miss.
    """
    queries = [item.query for item in data.evalset.items]
    key = {
        "retriever": component_config(cfg.retrieval),
        "chunking": data.chunking_config,
        "corpus": data.corpus.fingerprint(),
        "queries": stable_hash(queries),
        "depth": depth,
    }
    computed = False

    def compute() -> list:
        nonlocal computed
        computed = True
        retriever.index(data.chunks)
        return [[[cid, float(score)] for cid, score in trec_order(r)] for r in retriever.search(queries, depth)]

    rows = cache.get_or_compute_json("retrieval", key, compute)
    return [[(cid, score) for cid, score in ranking] for ranking in rows], not computed


def rerank(
    cfg: DictConfig, data: PreparedData, reranker: Any, rankings: list, depth_key: dict, cache: StageCache
) -> list[list[tuple[str, float]]]:
    queries = [item.query for item in data.evalset.items]
    key = {"reranker": component_config(cfg.reranker), "candidates": stable_hash(rankings), **depth_key}
    rows = cache.get_or_compute_json(
        "rerank",
        key,
        lambda: [
            [[cid, float(score)] for cid, score in trec_order(r)]
            for r in reranker.rerank(queries, rankings, data.chunks_by_id)
        ],
    )
    return [[(cid, score) for cid, score in ranking] for ranking in rows]


#: ``context_<m>`` = ``<m>_at_{context depth}``: what the generator is (or would be) shown.
CONTEXT_METRICS = ("hit_rate", "recall", "context_precision")


def context_depth(cfg: DictConfig, generator: Any | None) -> int:
    """How many chunks reach the generator: its ``context_k``, else ``eval.context_k``."""
    return int(getattr(generator, "context_k", 0) or cfg.eval.context_k)


def add_context_metrics(per_query: dict[str, dict[str, float]], aggregate: dict[str, float], depth: int) -> None:
    """Alias the metrics at the context depth as ``context_hit_rate`` etc., so runs that hand a
    different number of chunks to the generator (k=5 vs k=3) are compared and gated on one key."""
    for name in CONTEXT_METRICS:
        source = f"{name}_at_{depth}"
        target = name if name == "context_precision" else f"context_{name}"
        for metrics in per_query.values():
            if source in metrics:
                metrics[target] = metrics[source]
        if source in aggregate:
            aggregate[target] = aggregate[source]
    aggregate["context_k"] = float(depth)


def per_tag_means(per_query: Mapping[str, Mapping[str, float]], tags_by_query: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``tag.<tag>.<metric>``: the metric's mean over the queries carrying ``tag``."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    for qid, metrics in per_query.items():
        for tag in tags_by_query.get(qid, ()):
            for name, value in metrics.items():
                sums[(tag, name)].append(value)
    return {f"tag.{tag}.{name}": sum(v) / len(v) for (tag, name), v in sorted(sums.items())}


def run_label(cfg: DictConfig, data: PreparedData) -> str:
    """Readable run name: ``chunk=recursive-512 emb=minilm search=hybrid_rrf rerank=none``."""
    parts = [
        f"chunk={data.chunking_label}",
        f"emb={cfg.embedding.get('name', '?') if cfg.get('embedding') else 'none'}",
        f"search={cfg.retrieval.get('name', 'custom')}",
        f"rerank={cfg.reranker.get('name', 'custom') if cfg.get('reranker') else 'none'}",
        f"k={','.join(str(k) for k in cfg.eval.ks)}",
    ]
    if cfg.get("generator") and component_config(cfg.generator):
        parts.append(f"gen={cfg.generator.get('name', 'custom')}")
    if "sampled" in data.evalset.meta:
        parts.append(f"sample={len(data.evalset.items)}")
    return " ".join(parts)


@dataclass
class Pipeline:
    """The built components of one configuration; models load lazily, on first use."""

    retriever: Any
    reranker: Any | None
    generator: Any | None
    judge: Any | None = None


def build_pipeline(cfg: DictConfig, cache: StageCache) -> Pipeline:
    """Build retriever, reranker, generator and (with a generator) the judge; a bad parameter
    fails here, before chunking or caching."""
    retriever = build_component(cfg.retrieval, "retrieval", cache)
    if retriever is None:
        raise RagexpInputError("needs a _target_ (e.g. retrieval=bm25)", field="retrieval")
    if not hasattr(retriever, "search") and hasattr(retriever, "retrieve"):
        retriever = _RetrieveAdapter(retriever)
    generator = build_component(cfg.get("generator"), "generator", cache)
    judge = build_component(cfg.get("judge"), "judge", cache) if generator is not None else None
    return Pipeline(retriever, build_component(cfg.get("reranker"), "reranker", cache), generator, judge)


def execute(
    cfg: DictConfig,
    *,
    cache: StageCache,
    data: PreparedData | None = None,
    pipeline: Pipeline | None = None,
    progress: bool = True,
    generation_step: Callable[..., Any] | None = None,
) -> RunOutput:
    """Evaluate the pipeline ``cfg`` describes. Bad config raises before any expensive work."""
    validate(cfg)
    pipeline = pipeline or build_pipeline(cfg, cache)
    retriever, reranker, generator = pipeline.retriever, pipeline.reranker, pipeline.generator
    timings: dict[str, float] = {}
    started = time.perf_counter()
    data = data or prepare_data(cfg, cache, progress=progress)
    timings["prepare_s"] = time.perf_counter() - started
    depth = retrieval_depth(cfg, reranker, generator)

    t0 = time.perf_counter()
    rankings, retrieval_cached = retrieve(cfg, data, retriever, depth, cache)
    timings["retrieval_s"] = time.perf_counter() - t0
    if reranker is not None:
        t0 = time.perf_counter()
        rankings = rerank(cfg, data, reranker, rankings, {"depth": depth, "corpus": data.corpus.fingerprint()}, cache)
        timings["rerank_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    items = data.evalset.items
    qids = [item.id for item in items]
    run = dict(zip(qids, rankings))
    ks = sorted(set(cfg.eval.ks))
    depth_k = context_depth(cfg, generator)
    chunk_eval = evaluate_run(run, data.chunk_qrels, sorted({*ks, depth_k}))
    add_context_metrics(chunk_eval.per_query, chunk_eval.aggregate, depth_k)
    doc_eval = evaluate_run({q: doc_level(r) for q, r in run.items()}, data.doc_qrels, ks, prefix="doc_")
    tags_by_query = {item.id: item.tags for item in items}
    aggregates: dict[str, float] = {**chunk_eval.aggregate, **doc_eval.aggregate}
    aggregates.update(per_tag_means(chunk_eval.per_query, tags_by_query))
    aggregates["n_chunks"] = float(len(data.chunks))
    aggregates["retrieval_depth"] = float(depth)
    aggregates.update(_confidence_intervals(chunk_eval.per_query, ks, cfg.eval.bootstrap_resamples))
    timings["evaluation_s"] = time.perf_counter() - t0

    per_query = []
    for item, ranking in zip(items, rankings):
        metrics = {**chunk_eval.per_query.get(item.id, {}), **doc_eval.per_query.get(item.id, {})}
        per_query.append(
            {
                "query_id": item.id,
                "query": item.query,
                "tags": list(item.tags),
                "answerable": item.answerable,
                "ranking": [[cid, score] for cid, score in ranking],
                "relevant": data.chunk_qrels.get(item.id, {}),
                "doc_relevant": data.doc_qrels.get(item.id, {}),
                "first_relevant_rank": chunk_eval.first_relevant_rank.get(item.id),
                "metrics": metrics,
            }
        )

    if generator is not None and generation_step is not None:
        t0 = time.perf_counter()
        aggregates.update(generation_step(cfg, data, generator, per_query, cache, judge=pipeline.judge))
        timings["generation_s"] = time.perf_counter() - t0

    output_hash = config_hash(cfg, data)
    meta = {
        "run_name": run_label(cfg, data),
        "config_hash": output_hash,
        "evalset_fingerprint": data.evalset.fingerprint(),
        "corpus_fingerprint": data.corpus.fingerprint(),
        "n_queries": len(items),
        "ks": ks,
        "context_k": depth_k,
        "retrieval_from_cache": retrieval_cached,
        "ragexp_version": __version__,
    }
    timings["total_s"] = time.perf_counter() - started
    meta["timings"] = timings
    return RunOutput(RunResults(meta=meta, aggregates=aggregates, per_query=per_query), meta["run_name"], output_hash, timings)


def _confidence_intervals(per_query: Mapping[str, Mapping[str, float]], ks: Sequence[int], resamples: int) -> dict[str, float]:
    """``<metric>_ci_low`` / ``_ci_high``: percentile-bootstrap 95% CI of the mean over queries."""
    names = {pattern.format(k=k) for pattern in CI_METRICS for k in ks}
    out: dict[str, float] = {}
    for name in sorted(names):
        values = [m[name] for m in per_query.values() if name in m]
        if len(values) < 2:
            continue
        ci = mean_ci(values, n_resamples=resamples)
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = ci.low, ci.high
    return out
