"""Stage cache: the same retrieval config run twice on SciFact; the second run is served from cache.

Each config builds a fresh retriever (as a new run of a sweep would) over a fresh temporary
:class:`~ragexp.runtime.stage_cache.StageCache`, indexes the SciFact documents (all 5,183, or ``--docs N``)
and searches the 300 test queries at k = 100, twice. The table prints both wall times, their ratio, the cache hits
and misses of the second run, and checks that both runs return identical rankings.
A second table answers whether caching a FAISS index is worth it: rebuilding it from cached
embeddings vs loading the cached serialised index.

Run: ``python -m benchmarks.bench_cache [--model minilm|paraphrase-minilm-l3] [--docs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import shared_data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragexp.chunking.whole import WholeDocumentChunker  # noqa: E402
from ragexp.data.loaders.beir import load_beir  # noqa: E402
from ragexp.runtime.stage_cache import StageCache  # noqa: E402
from reference_pipelines.bm25 import BM25Retriever  # noqa: E402
from reference_pipelines.dense import DenseRetriever  # noqa: E402


def run_once(make_retriever, cache: StageCache, chunks, queries):
    before_hits, before_misses = dict(cache.hits), dict(cache.misses)
    start = time.perf_counter()
    retriever = make_retriever(cache)
    retriever.index(chunks)
    rankings = retriever.search(queries, 100)
    seconds = time.perf_counter() - start
    hits = {s: n - before_hits.get(s, 0) for s, n in cache.hits.items() if n - before_hits.get(s, 0)}
    misses = {s: n - before_misses.get(s, 0) for s, n in cache.misses.items() if n - before_misses.get(s, 0)}
    return rankings, seconds, hits, misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="paraphrase-minilm-l3", help="encoder short name or path")
    parser.add_argument("--docs", type=int, default=None, help="use only the first N documents")
    args = parser.parse_args()

    data = shared_data_dir()
    corpus, evalset = load_beir(data / "scifact", split="test")
    chunks = WholeDocumentChunker().chunk_corpus(corpus)[: args.docs]
    queries = [item.query for item in evalset.items]
    dense_name = f"dense {args.model} hnsw"
    configs = {
        dense_name: lambda cache: DenseRetriever(encoder={"model": args.model}, index="hnsw", cache=cache),
        "bm25 okapi": lambda cache: BM25Retriever(variant="okapi", cache=cache),
    }
    print(f"SciFact: {len(chunks)} chunks, {len(queries)} queries, k=100\n")
    header = f"{'config':34s} {'run 1 s':>8s} {'run 2 s':>8s} {'ratio':>7s}  run 2 hits / misses"
    print(header + "\n" + "-" * (len(header) + 20))
    failures = 0
    with tempfile.TemporaryDirectory() as root:
        for name, make in configs.items():
            cache = StageCache(Path(root) / name.replace(" ", "_"))
            first, cold_s, _, _ = run_once(make, cache, chunks, queries)
            second, warm_s, hits, misses = run_once(make, cache, chunks, queries)
            failures += first != second or bool(misses)
            print(f"{name:34s} {cold_s:8.2f} {warm_s:8.2f} {cold_s / warm_s:6.1f}x  {hits} / {misses or '{}'}")

        print("\nis caching the FAISS index worth it? index() with the embeddings already cached:")
        cache = StageCache(Path(root) / dense_name.replace(" ", "_"))
        shutil.rmtree(cache.root / "faiss-index")  # keep the embeddings, drop the trained index
        for label in ("flat: built from embeddings", "hnsw: built from embeddings", "hnsw: loaded from cache"):
            index = label.split(":")[0]
            start = time.perf_counter()
            DenseRetriever(encoder={"model": args.model}, index=index, cache=cache).index(chunks)
            print(f"  {label:30s} {time.perf_counter() - start:6.2f} s")
    if failures:
        print("FAIL: a second run missed the cache or returned different rankings")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
