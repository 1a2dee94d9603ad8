"""The order in which SciFact (claim, abstract) pairs were drawn for hand labelling.

Every claim of ``qrels/test.tsv`` and ``qrels/train.tsv`` (1,109, disjoint splits) is shuffled once
with ``random.Random(SEED)`` (claim ids sorted first). Two candidate streams come from that order:

- ``cited``: the claims front to back, each paired with its first cited abstract (qrels order).
- ``bm25_top1_uncited``: the claims back to front whose best-scoring abstract under BM25
  (``reference_pipelines.bm25.BM25Retriever`` defaults: Okapi, k1=1.5, b=0.75, title + text) is one
  the claim does not cite in either split, paired with that abstract: what a top-1 BM25 retriever
  would hand a judge instead of the cited evidence (a hard negative candidate; reading decides
  what it says). Claims whose top hit is cited are passed over.

The labeller walks each stream in order; ``benchmarks/data/README.md`` says which pairs were kept.
Run ``python -m benchmarks.scifact_judge_draw --scifact DIR --stream cited -n 20`` to print the
next pairs with their texts for reading (the texts go to the terminal, never into the repo).
"""

from __future__ import annotations

import argparse
import random
import textwrap
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from ragexp.chunking.whole import WholeDocumentChunker
from ragexp.data.loaders.beir import load_beir
from ragexp.datamodel import Corpus
from ragexp.metrics.ranking import document_id
from reference_pipelines.bm25 import BM25Retriever

SEED = 20250611
SPLITS = ("test", "train")
CITED = "cited"
BM25_TOP1_UNCITED = "bm25_top1_uncited"
STREAMS = (CITED, BM25_TOP1_UNCITED)


@dataclass(frozen=True)
class Candidate:
    claim_id: str
    doc_id: str
    source: str


@dataclass(frozen=True)
class SciFactClaims:
    """The corpus, every qrels claim's text and its cited abstracts (test and train together)."""

    corpus: Corpus
    claims: dict[str, str]
    cited: dict[str, tuple[str, ...]]


def load_claims(scifact: str | PathLike[str]) -> SciFactClaims:
    """The SciFact folder's corpus and qrels claims (cited abstracts in qrels order)."""
    claims: dict[str, str] = {}
    cited: dict[str, tuple[str, ...]] = {}
    for split in SPLITS:
        corpus, evalset = load_beir(scifact, split=split)
        for item in evalset.items:
            claims[item.id] = item.query
            cited[item.id] = tuple(e.doc_id for e in item.evidence)
    return SciFactClaims(corpus, claims, cited)


def claim_order(data: SciFactClaims, seed: int = SEED) -> list[str]:
    """Claim ids sorted, then shuffled once with ``random.Random(seed)``."""
    order = sorted(data.claims)
    random.Random(seed).shuffle(order)
    return order


def cited_stream(data: SciFactClaims, seed: int = SEED) -> list[Candidate]:
    return [Candidate(claim, data.cited[claim][0], CITED) for claim in claim_order(data, seed)]


def bm25_stream(data: SciFactClaims, seed: int = SEED) -> list[Candidate]:
    claims = claim_order(data, seed)[::-1]
    retriever = BM25Retriever()
    retriever.index(WholeDocumentChunker().chunk_corpus(data.corpus))
    rankings = retriever.search([data.claims[claim] for claim in claims], k=1)
    stream = []
    for claim, ranking in zip(claims, rankings):
        top_doc = document_id(ranking[0][0]) if ranking else None
        if top_doc is not None and top_doc not in data.cited[claim]:
            stream.append(Candidate(claim, top_doc, BM25_TOP1_UNCITED))
    return stream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", required=True, type=Path, help="BEIR SciFact folder")
    parser.add_argument("--stream", choices=STREAMS, required=True)
    parser.add_argument("--start", type=int, default=0, help="first position in the stream to print")
    parser.add_argument("-n", type=int, default=10, help="pairs to print")
    args = parser.parse_args(argv)
    data = load_claims(args.scifact)
    if args.stream == CITED:
        stream = cited_stream(data)
    else:
        stream = bm25_stream(data)
    for position, candidate in enumerate(stream[args.start : args.start + args.n], start=args.start):
        doc = data.corpus[candidate.doc_id]
        print(f"=== #{position} claim {candidate.claim_id} doc {candidate.doc_id} ({candidate.source})")
        print(f"CLAIM: {data.claims[candidate.claim_id]}")
        print(f"TITLE: {doc.title}")
        print(textwrap.fill(doc.text, 160))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
