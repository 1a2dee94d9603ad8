"""One evaluated run, from prepared data and built pipeline to :class:`RunResults`; no MLflow here.

Data flow (:mod:`~ragexp.evaluation.prepared` made the chunks and their relevance,
:mod:`~ragexp.evaluation.pipeline` built the components): retrieval once at the largest depth needed
(for a black-box system: its responses, placed in the corpus, :mod:`ragexp.evaluation.system_step`, which
also replaces the chunks and their relevance by its units') -> optional reranking -> retrieval metrics at every
k, chunk-level and document-level (``doc_``), overall, per tag and per item source -> optional generation and
judging -> per-query records -> the run's cost (``cost.*`` aggregates and ``meta.cost``:
:mod:`ragexp.cost.run_cost`). Every expensive stage goes through the stage cache, keyed by
exactly what determines it, so a sweep pays once per distinct piece of work.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ragexp import __version__
from ragexp.cost.run_cost import measure_run
from ragexp.datamodel import Chunk
from ragexp.evaluation.generation_step import generation_step
from ragexp.evaluation.job_spec import JobSpec
from ragexp.evaluation.pipeline import Pipeline, build_encoder
from ragexp.evaluation.prepared import PreparedData
from ragexp.evaluation.results import QueryResult, RunResults
from ragexp.evaluation.retrieval_step import retrieval_step
from ragexp.evaluation.system_step import system_step
from ragexp.judging.calibration.record import judge_run_record
from ragexp.llm.usage import TokenUsage
from ragexp.metrics.evaluate import evaluate_run
from ragexp.metrics.judged import judged_metrics
from ragexp.metrics.measure import at, ci_bounds
from ragexp.metrics.per_tag import UNRECORDED_SOURCE, per_source_means, per_tag_means
from ragexp.metrics.stats import bootstrap_cis
from ragexp.runtime.fingerprint import file_hash, stable_hash
from ragexp.runtime.stage_cache import StageCache
from ragexp.runtime.text_vectors import encoding_counts, encodings_since
from ragexp.systems.build import is_black_box, unused_groups
from ragexp.text.tokenize import stemmer_library

log = logging.getLogger(__name__)

#: Config keys that change how a run is tracked or displayed, not what it computes.
NON_SEMANTIC_KEYS = ("tracking", "progress", "resume", "cache_dir", "cost")
#: Metrics that get a bootstrap 95% CI on every run: these at every k, and :data:`CI_METRICS_NO_K`.
CI_METRICS_AT_K = ("hit_rate", "recall", "context_precision", "ndcg")
CI_METRICS_NO_K = ("mrr",)


@dataclass
class RunOutput:
    results: RunResults
    run_name: str
    config_hash: str
    timings: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # extra text artifacts by relative path (a system's responses)
    units: Mapping[str, Chunk] | None = None  # a black-box system's placed passages by unit id (its traces show them)


def semantic_config(cfg: DictConfig) -> dict:
    """The resolved config minus keys that do not change results (hashing and reproduce use it),
    and minus the pipeline groups a black-box system replaces (:func:`ragexp.systems.build.unused_groups`)."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in (*NON_SEMANTIC_KEYS, *unused_groups(data)):
        data.pop(key, None)
    return data


def config_hash(cfg: DictConfig, data: PreparedData) -> str:
    """Identity of a run's work: semantic config (chunking as the chunker's effective options) +
    corpus and eval-set fingerprints + the stemming library (BM25 and the lexical judge stem with
    it, and Snowball releases stem some words apart: :func:`~ragexp.text.tokenize.stemmer_library`),
    + the content of a judge calibration file or a system's recording the config names (only by path)."""
    config = semantic_config(cfg)
    if "chunking" in config:
        config["chunking"] = data.chunking_config
    parts = {"config": config, "corpus": data.corpus.fingerprint(), "evalset": data.evalset.fingerprint(),
             "stemmer_library": stemmer_library()}
    recorded = cfg.system.get("path") if cfg.get("system") is not None and is_black_box(config) else None
    if recorded and Path(recorded).is_file():
        parts["system_recording"] = file_hash(recorded)
    calibration = cfg.judge.get("calibration") if cfg.get("judge") else None
    if calibration and Path(calibration).is_file():
        parts["judge_calibration"] = file_hash(calibration)
    return stable_hash(parts)


#: ``{<m>: <alias>}``: the alias names ``<m>`` at the context depth, what the generator is (or would be) shown.
CONTEXT_METRICS = {"hit_rate": "context_hit_rate", "recall": "context_recall", "context_precision": "context_precision"}


def add_context_metrics(per_query: dict[str, dict[str, float]], aggregate: dict[str, float], depth: int) -> None:
    """Alias the metrics at the context depth as ``context_hit_rate`` etc., so runs that hand a
    different number of chunks to the generator (k=5 vs k=3) are compared and gated on one key."""
    for name, target in CONTEXT_METRICS.items():
        source = at(name, depth)
        for metrics in per_query.values():
            if source in metrics:
                metrics[target] = metrics[source]
        if source in aggregate:
            aggregate[target] = aggregate[source]
    aggregate["context_k"] = float(depth)


def embedding_backend(pipeline: Pipeline) -> dict[str, str]:
    """``{"embedding_backend": "onnx"|"torch"}``: the backend the run's embedding model encodes with
    (``torch`` also when ``onnx`` was configured and ONNX could not export the model); empty when
    the run uses no embedding model."""
    backend = (getattr(pipeline.encoder, "identity", None) or {}).get("backend")
    return {"embedding_backend": backend} if backend else {}


def execute(spec: JobSpec, *, cache: StageCache, data: PreparedData, pipeline: Pipeline, run_name: str,
            responses=None) -> RunOutput:
    """Evaluate ``pipeline`` on ``data`` as ``spec`` (checked by the gate) describes; ``run_name``
    labels the results (:func:`ragexp.tracking.run_names.run_name`); ``responses``: a black-box
    system's, fetched already (:func:`ragexp.evaluation.system_step.fetch_responses`)."""
    cfg, options = spec.config, spec.eval
    started = time.perf_counter()
    encodings_before = encoding_counts()
    system_run = system_step(spec, data, pipeline.system, cache, responses) if pipeline.system is not None else None
    if system_run is not None:  # a black box: its placed passages are the units, scored below as any run's
        data, retrieved = system_run.data, system_run.retrieved
        answered = system_run.answers is not None
        pipeline = replace(pipeline, generator=system_run.answers, encoder=build_encoder(cfg, cache) if answered else None)
    else:
        retrieved = retrieval_step(spec, data, pipeline, cache)
    generator = pipeline.generator
    rankings, depth = retrieved.rankings, retrieved.depth
    timings = dict(retrieved.timings)

    t0 = time.perf_counter()
    items = data.evalset.items
    qids = [item.id for item in items]
    run = dict(zip(qids, rankings))
    ks = list(options.ks)
    depth_k = options.context_k  # what the generator is (or would be) shown
    chunk_eval = evaluate_run(run, data.chunk_qrels, sorted({*ks, depth_k}))
    add_context_metrics(chunk_eval.per_query, chunk_eval.aggregate, depth_k)
    doc_eval = evaluate_run(dict(zip(qids, retrieved.doc_rankings)), data.doc_qrels, ks, doc=True)
    judged_per_query, judged_aggregate = judged_metrics(run, data.chunk_qrels, ks)  # pool coverage, grade 0 counts
    tags_by_query = {item.id: item.tags for item in items}
    aggregates: dict[str, float] = {**chunk_eval.aggregate, **doc_eval.aggregate, **judged_aggregate}
    aggregates.update(per_tag_means(chunk_eval.per_query, tags_by_query))
    aggregates.update(per_source_means(chunk_eval.per_query, items))
    aggregates["n_chunks"] = float(len(data.chunks))
    aggregates["retrieval_depth"] = float(depth)
    aggregates["n_docs_not_indexed"] = float(len(data.not_indexed))
    conversion = data.corpus.conversion
    if conversion is not None:
        aggregates["n_files_skipped"] = float(len(conversion.skipped))
        aggregates["n_files_empty"] = float(len(conversion.empty))
    aggregates.update(_confidence_intervals(chunk_eval.per_query, ks, options.bootstrap_resamples))
    if system_run is not None:
        aggregates.update(system_run.aggregates)
    timings["evaluation_s"] = time.perf_counter() - t0

    pages = PageLabels(data) if any(doc.page_starts for doc in data.corpus.values()) else None
    per_query = []
    for item, ranking in zip(items, rankings):
        metrics = {**chunk_eval.per_query.get(item.id, {}), **doc_eval.per_query.get(item.id, {}),
                   **judged_per_query.get(item.id, {}),
                   **(system_run.per_query.get(item.id, {}) if system_run is not None else {})}
        paged = pages is not None
        per_query.append(QueryResult(
            query_id=item.id,
            query=item.query,
            tags=tuple(item.tags),
            source=item.source,
            answerable=item.answerable,
            ranking=tuple((cid, float(score)) for cid, score in ranking),
            relevant=dict(data.chunk_qrels.grades(item.id)),
            doc_relevant=dict(data.doc_qrels.grades(item.id)),
            first_relevant_rank=chunk_eval.first_relevant_rank.get(item.id),
            metrics=metrics,
            pages=pages.of_chunks([cid for cid, _ in ranking[: max(ks)]]) if paged else None,
            gold_pages=tuple(pages.of_evidence(item.evidence)) if paged else None,
        ))

    usage = {"generation": TokenUsage(), "judging": TokenUsage()}
    if generator is not None:
        t0 = time.perf_counter()
        generation_aggregates, per_query = generation_step(spec, data, pipeline, per_query, cache, usage)
        aggregates.update(generation_aggregates)
        timings["generation_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cost_aggregates, cost_record = measure_run(spec.cost, data, pipeline, cache, retrieval=spec.block("retrieval"),
                                               context_k=depth_k, progress=bool(cfg.progress),
                                               index_build=retrieved.index_build, depth=depth,
                                               usage=usage if generator is not None else {}, timings=timings)
    aggregates.update(cost_aggregates)
    timings["cost_s"] = time.perf_counter() - t0  # measuring the cost, the served-latency probe included

    output_hash = config_hash(cfg, data)
    meta = {
        "run_name": run_name,
        "config_hash": output_hash,
        "evalset_fingerprint": data.evalset.fingerprint(),
        "corpus_fingerprint": data.corpus.fingerprint(),
        "n_queries": len(items),
        "ks": ks,
        "context_k": depth_k,
        "retrieval_from_cache": retrieved.from_cache,
        "encodings": encodings_since(encodings_before),  # distinct texts encoded vs read back, per encoder
        **embedding_backend(pipeline),
        "warnings": [*data.corpus_warnings, *retrieved.warnings, *(system_run.warnings if system_run else []),
                     *source_warnings(items)],
        "docs_not_indexed": data.not_indexed[:20],
        "gold": data.evalset.meta.get("gold", {}),  # the gold check: spans re-anchored (each), spans unverifiable
        "ragexp_version": __version__,
    }
    if conversion is not None:
        meta["corpus_conversion"] = conversion.summary()
    if system_run is not None:
        meta["system"] = system_run.meta
    if cost_record:
        meta["cost"] = cost_record
    if generator is not None and pipeline.judge is not None:
        meta["judge"] = judge_run_record(pipeline.judge)
    timings["total_s"] = time.perf_counter() - started
    meta["timings"] = timings
    return RunOutput(RunResults(meta=meta, aggregates=aggregates, per_query=per_query), meta["run_name"], output_hash, timings,
                     system_run.artifacts if system_run is not None else {},
                     system_run.data.chunks_by_id if system_run is not None else None)


class PageLabels:
    """``"p. 3"`` / ``"pp. 3-4"``: the pages a chunk or an evidence span lies on, in documents
    with a page map (converted PDFs, ``Document.page_starts``)."""

    def __init__(self, data: PreparedData) -> None:
        self.corpus = data.corpus
        self.chunks = data.chunks_by_id

    def label(self, doc_id: str, start: int, end: int) -> str | None:
        document = self.corpus.get(doc_id)
        if document is None:  # a black-box passage that could not be placed
            return None
        first, last = document.page_of(start), document.page_of(max(start, end - 1))
        if first is None:
            return None
        return f"p. {first}" if first == last else f"pp. {first}-{last}"

    def of_chunks(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """``{chunk id: label}`` for the chunks that lie in paged documents."""
        labels = {}
        for cid in chunk_ids:
            chunk = self.chunks.get(cid)
            label = self.label(chunk.doc_id, chunk.start, chunk.end) if chunk is not None else None
            if label is not None:
                labels[cid] = label
        return labels

    def of_evidence(self, evidence) -> list[str]:
        """``"<doc id> p. 3"`` for every evidence span in a paged document (a whole document: all its pages)."""
        out = []
        for e in evidence:
            document = self.corpus.get(e.doc_id)
            if document is None or not document.page_starts:
                continue
            start, end = (e.start, e.end) if e.is_span else (0, len(document.text))
            out.append(f"{e.doc_id} {self.label(e.doc_id, start, end)}")
        return out


def source_warnings(items: Sequence) -> list[str]:
    """A warning when the eval set mixes drafted (``source: draft``) and other items: the overall
    means average generated and real questions; the ``source.<s>.<m>`` metrics split them."""
    sources = Counter(item.source or UNRECORDED_SOURCE for item in items)
    if "draft" not in sources or len(sources) == 1:
        return []
    counts = ", ".join(f"{n} {source}" for source, n in sorted(sources.items()))
    return [(f"the eval set mixes drafted and other questions ({counts}): the overall metrics average them; "
             "see the source/<source>/ metrics (ragexp compare --by-source METRIC) for each on its own")]


def _confidence_intervals(per_query: Mapping[str, Mapping[str, float]], ks: Sequence[int], resamples: int) -> dict[str, float]:
    """``<metric>_ci_low`` / ``_ci_high``: percentile-bootstrap 95% CI of the mean over queries."""
    names = sorted({*(at(name, k) for name in CI_METRICS_AT_K for k in ks), *CI_METRICS_NO_K})
    samples = {name: [m[name] for m in per_query.values() if name in m] for name in names}
    cis = bootstrap_cis({name: values for name, values in samples.items() if len(values) >= 2}, n_resamples=resamples)
    out: dict[str, float] = {}
    for name, (low, high) in cis.items():
        low_key, high_key = ci_bounds(name)
        out[low_key], out[high_key] = low, high
    return out
