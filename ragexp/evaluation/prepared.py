"""The data one run evaluates on: the dataset loaded, chunked (cached), and the relevance of
every chunk and document derived from the gold evidence for this chunking."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from omegaconf import DictConfig

from ragexp.chunking import make_chunker
from ragexp.config.schema import chunker_options
from ragexp.data import Chunk, Corpus, EvalSet
from ragexp.data.dataset import load_dataset
from ragexp.data.loaders.corpus import persist_conversions
from ragexp.evaluation.relevance import OverlapRule, chunk_qrels, doc_qrels
from ragexp.runtime.stage_cache import StageCache

log = logging.getLogger(__name__)


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
    not_indexed: list[str]  # documents without text and title: no chunk, never retrievable
    corpus_warnings: list[str] = field(default_factory=list)  # files skipped, empty, noted; converter changes

    @property
    def chunks_by_id(self) -> dict[str, Chunk]:
        return {chunk.id: chunk for chunk in self.chunks}


def prepare_data(cfg: DictConfig, cache: StageCache, progress: bool = True) -> PreparedData:
    """Load the dataset, chunk it (cached) and derive chunk- and document-level qrels.

    A document with neither text nor title gets no chunk; it is listed in ``not_indexed`` and,
    like at chunk level, its evidence counts at document level neither (an item whose only gold
    lies there has no gold and is left out of the retrieval means at both levels)."""
    corpus, evalset = load_dataset(cfg.dataset, cache)
    persist_conversions(corpus, cache)  # only now: a refused eval set leaves no conversion behind
    corpus_warnings = corpus.conversion.warnings() if corpus.conversion is not None else []
    for warning in corpus_warnings:
        log.warning("corpus: %s", warning)
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
    not_indexed = [doc_id for doc_id in corpus if doc_id not in by_doc]
    if not_indexed:
        log.warning("%d documents have neither text nor title and are not indexed (e.g. %s)", len(not_indexed),
                    ", ".join(not_indexed[:5]))
    indexed_doc_qrels = {
        qid: {doc_id: grade for doc_id, grade in grades.items() if doc_id in by_doc}
        for qid, grades in doc_qrels(evalset.items).items()
    }
    return PreparedData(
        corpus=corpus,
        evalset=evalset,
        chunks=chunks,
        chunk_qrels=chunk_qrels(evalset.items, by_doc, rule),
        doc_qrels=indexed_doc_qrels,
        chunking_label=chunker.describe(),
        chunking_config=chunker.config,
        not_indexed=not_indexed,
        corpus_warnings=corpus_warnings,
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
