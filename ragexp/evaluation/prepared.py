"""The data one run evaluates on: the dataset loaded, chunked (cached), and the relevance of
every chunk and document derived from the gold evidence for this chunking."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ragexp.chunking import make_chunker
from ragexp.config.schema import chunker_options
from ragexp.data.dataset import load_dataset
from ragexp.data.loaders.corpus import persist_conversions
from ragexp.datamodel import Chunk, Corpus, EvalSet, Qrels
from ragexp.evaluation.job_spec import JobSpec
from ragexp.metrics.relevance import chunk_qrels, doc_qrels
from ragexp.runtime.stage_cache import StageCache

log = logging.getLogger(__name__)


@dataclass
class PreparedData:
    """The dataset, chunked, with relevance derived for this chunking; fixed for a run."""

    corpus: Corpus
    evalset: EvalSet
    chunks: list[Chunk]
    chunk_qrels: Qrels
    doc_qrels: Qrels
    chunking_label: str
    chunking_config: dict
    not_indexed: list[str]  # documents without text and title: no chunk, never retrievable
    corpus_warnings: list[str] = field(default_factory=list)  # files skipped, empty, noted; converter changes; the loader's; blank gold

    @property
    def chunks_by_id(self) -> dict[str, Chunk]:
        return {chunk.id: chunk for chunk in self.chunks}


def prepare_data(spec: JobSpec, cache: StageCache, progress: bool = True, chunked: bool = True,
                 loaded: tuple[Corpus, EvalSet] | None = None) -> PreparedData:
    """Load the dataset (or take the one ``loaded`` by :func:`load_dataset` already: a job loads it,
    and so checks its gold against today's corpus, before it builds any model), chunk it (cached)
    and derive chunk- and document-level qrels.
    ``chunked=False`` (a black-box system, whose passages are its units: :mod:`ragexp.evaluation.system_step`)
    leaves the corpus unchunked: no chunks, no chunk qrels, nothing cached.

    A document with neither text nor title gets no chunk; it is listed in ``not_indexed`` and its
    evidence stays gold at both levels, under the document's own id (:func:`blank_gold`): no run
    can retrieve it, so an item whose gold lies there scores 0, as trec_eval scores every query
    with qrels, and is named in the run's warnings (:func:`blank_gold_warnings`)."""
    cfg, options = spec.config, spec.eval
    corpus, evalset = loaded if loaded is not None else load_dataset(cfg.dataset, cache)
    persist_conversions(corpus, cache)  # only now: a refused eval set leaves no conversion behind
    corpus_warnings = corpus.conversion.warnings() if corpus.conversion is not None else []
    for warning in corpus_warnings:
        log.warning("corpus: %s", warning)
    if options.sample is not None:
        evalset = sample_evalset(evalset, options.sample, options.sample_seed)
    chunker = make_chunker(chunker_options(cfg.chunking))
    if chunked:
        key = {"corpus": corpus.fingerprint(), "chunking": chunker.config}
        rows = cache.get_or_compute_json(
            "chunks", key, lambda: [_chunk_row(c) for c in chunker.chunk_corpus(corpus, progress=progress)]
        )
        chunks = [Chunk(**row) for row in rows]
    else:  # only which documents a chunker could not index: neither text nor title (ragexp.chunking.base)
        chunks = [Chunk(f"{d}#chunk_0", d, 0, 0, 0, "", "") for d, doc in corpus.items() if doc.text.strip() or doc.title.strip()]
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_doc[chunk.doc_id].append(chunk)
    not_indexed = [doc_id for doc_id in corpus if doc_id not in by_doc]
    if not_indexed:
        log.warning("%d documents have neither text nor title and are not indexed (e.g. %s)", len(not_indexed),
                    ", ".join(not_indexed[:5]))
    by_chunk = (chunk_qrels(evalset.items, by_doc, options.relevance) if chunked
                else Qrels({item.id: {} for item in evalset.items}))
    by_document = doc_qrels(evalset.items)
    blank = blank_gold(by_document, set(not_indexed))
    for warning in [*evalset.meta.get("warnings", []), *blank_gold_warnings(blank)]:
        log.warning("%s", warning)
    return PreparedData(
        corpus=corpus,
        evalset=evalset,
        chunks=chunks if chunked else [],
        chunk_qrels=with_blank_gold(by_chunk, blank),
        doc_qrels=by_document,
        chunking_label=chunker.describe(),
        chunking_config=chunker.config,
        not_indexed=not_indexed,
        corpus_warnings=[*corpus_warnings, *evalset.meta.get("warnings", []), *blank_gold_warnings(blank)],
    )


def blank_gold(qrels: Qrels, not_indexed: set[str]) -> dict[str, dict[str, int]]:
    """``{item id: {doc id: grade}}``: the relevant gold documents of each item that have no
    chunk. They enter the chunk-level qrels under the document id (:func:`with_blank_gold`), a unit
    no ranking can hold, so recall, nDCG and MRR count them as missed, exactly as trec_eval on the
    exported qrels."""
    found = {}
    for qid in qrels:
        blank = {doc_id: grade for doc_id, grade in qrels.relevant(qid).items() if doc_id in not_indexed}
        if blank:
            found[qid] = blank
    return found


def with_blank_gold(qrels: Qrels, blank: dict[str, dict[str, int]]) -> Qrels:
    """``qrels`` with each item's blank gold added under the document id, at the higher grade
    where the unit is graded already; the same relevance level."""
    if not blank:
        return qrels
    grades = {qid: dict(units) for qid, units in qrels.items()}
    for qid, documents in blank.items():
        for doc_id, grade in documents.items():
            grades[qid][doc_id] = max(grade, grades[qid].get(doc_id, grade))
    return Qrels(grades, qrels.relevance_level)


def blank_gold_warnings(blank: dict[str, dict[str, int]], limit: int = 10) -> list[str]:
    """One warning naming the items with gold in a document without text or title (at most ``limit``)."""
    if not blank:
        return []
    named = ", ".join(f"{qid} ({', '.join(sorted(docs))})" for qid, docs in list(blank.items())[:limit])
    more = f" and {len(blank) - limit} more" if len(blank) > limit else ""
    return [f"{len(blank)} queries have gold in a document with neither text nor title, which no retriever can "
            f"return; they count as retrieval failures: {named}{more}"]


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
