"""SciFact (BEIR, test split, 300 queries): the reference pipelines beside published numbers.

Corpus documents are whole-document chunks of ``title + " " + text``; metrics are trec_eval-exact
(:func:`ragexp.metrics.evaluate.evaluate_run`) at document level. Published values come from
``reference_numbers/mteb_extracted.json`` (MTEB results repository) and
``reference_numbers/pyserini_2cr_beir.yaml`` (Pyserini two-click reproductions).

Run: ``python -m benchmarks.bench_scifact [--cache-dir DIR] [--skip-onnx]``
(a fresh temporary cache by default, so the timings include encoding).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks import REPO, shared_data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragexp.chunking.whole import WholeDocumentChunker  # noqa: E402
from ragexp.data.loaders.beir import load_beir  # noqa: E402
from ragexp.datamodel import Qrels  # noqa: E402
from ragexp.metrics.evaluate import evaluate_run  # noqa: E402
from ragexp.metrics.ranking import document_id  # noqa: E402
from ragexp.runtime.stage_cache import StageCache  # noqa: E402
from reference_pipelines.bm25 import BM25Retriever  # noqa: E402
from reference_pipelines.dense import DenseRetriever  # noqa: E402
from reference_pipelines.hybrid import HybridRetriever  # noqa: E402

METRICS = ("ndcg_at_10", "recall_at_100", "mrr_at_10")


def shared_data() -> Path:
    return shared_data_dir()


def tokenizer_config(name: str) -> dict:
    """The BM25 tokenizer a run uses with ``retrieval/tokenizer=<name>``."""
    return yaml.safe_load((REPO / "conf" / "retrieval" / "tokenizer" / f"{name}.yaml").read_text())


def published(reference_dir: Path) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for entry in json.loads((reference_dir / "mteb_extracted.json").read_text()):
        if entry["task"] == "SciFact":
            rows[f"MTEB {entry['model']}"] = {m: entry[m] for m in METRICS}
    conditions = yaml.safe_load((reference_dir / "pyserini_2cr_beir.yaml").read_text())["conditions"]
    for condition in conditions:
        for dataset in condition["datasets"]:
            if dataset["dataset"] == "scifact":
                scores = dataset["scores"][0]
                rows[f"Pyserini {condition['name']}"] = {"ndcg_at_10": scores["nDCG@10"], "recall_at_100": scores["R@100"]}
    rows["BEIR paper BM25 (Thakur et al. 2021)"] = {"ndcg_at_10": 0.665}
    return rows


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, help="reuse a stage cache (default: a fresh temporary one)")
    parser.add_argument("--skip-onnx", action="store_true", help="skip the ONNX paraphrase-MiniLM-L3 row")
    args = parser.parse_args()

    data = shared_data()
    corpus, evalset = load_beir(data / "scifact", split="test")
    chunks = WholeDocumentChunker().chunk_corpus(corpus)
    queries = [item.query for item in evalset.items]
    qrels = Qrels({item.id: {e.doc_id: e.grade for e in item.evidence} for item in evalset.items})
    print(f"SciFact test: {len(corpus)} documents, {len(queries)} queries\n")

    with tempfile.TemporaryDirectory() as scratch:
        cache = StageCache(args.cache_dir or scratch)
        english, plain = (tokenizer_config(name) for name in ("english", "plain"))
        dense = {"encoder": {"model": "minilm"}, "index": "flat"}
        retrievers = {
            "bm25 okapi (rank_bm25-exact)": BM25Retriever(variant="okapi", tokenizer=english, cache=cache),
            "bm25 okapi, plain tokens": BM25Retriever(variant="okapi", tokenizer=plain, cache=cache),
            "bm25 lucene (bm25s-exact)": BM25Retriever(variant="lucene", tokenizer=english, cache=cache),
            "dense minilm-l6 flat": DenseRetriever(**dense, cache=cache),
        }
        if not args.skip_onnx:
            retrievers["dense paraphrase-minilm-l3 onnx flat"] = DenseRetriever(encoder={"model": "paraphrase-minilm-l3"}, cache=cache)
        hybrid = {"components": ["bm25", "dense"], "tokenizer": english, **dense, "cache": cache}  # as conf/retrieval/hybrid_*.yaml
        retrievers |= {
            "hybrid rrf (okapi + minilm)": HybridRetriever(fusion="rrf", rrf_k=60, **hybrid),
            **{
                f"hybrid weighted minmax w_bm25={w}": HybridRetriever(fusion="weighted", weight=w, **hybrid)
                for w in (0.3, 0.5, 0.7)
            },
        }

        results: dict[str, dict[str, float]] = {}
        for name, retriever in retrievers.items():
            _, index_s = timed(lambda: retriever.index(chunks))  # hybrids' parts come from the stage cache
            rankings, search_s = timed(lambda: retriever.search(queries, 100))
            run = {item.id: [(document_id(cid), score) for cid, score in ranking] for item, ranking in zip(evalset.items, rankings)}
            scores = evaluate_run(run, qrels, ks=[10, 100]).aggregate
            results[name] = {m: scores[m] for m in METRICS} | {"index_s": index_s, "search_s": search_s}

    header = f"{'pipeline':44s} {'nDCG@10':>8s} {'R@100':>8s} {'MRR@10':>8s} {'index s':>8s} {'search s':>9s}"
    print(header + "\n" + "-" * len(header))
    for name, row in results.items():
        print(f"{name:44s} {row['ndcg_at_10']:8.5f} {row['recall_at_100']:8.5f} {row['mrr_at_10']:8.5f} {row['index_s']:8.1f} {row['search_s']:9.2f}")
    print("\npublished")
    for name, row in published(data / "reference_numbers").items():
        cells = " ".join(f"{row[m]:8.5f}" if m in row else f"{'-':>8s}" for m in METRICS)
        print(f"{name:44s} {cells}")

    print("\ntargets")
    bm25_name, dense_name = "bm25 okapi (rank_bm25-exact)", "dense minilm-l6 flat"
    best_single = max(results[bm25_name]["ndcg_at_10"], results[dense_name]["ndcg_at_10"])
    checks = [
        (bm25_name, results[bm25_name]["ndcg_at_10"] >= 0.665, ">= 0.665 (BEIR BM25)"),
        (dense_name, abs(results[dense_name]["ndcg_at_10"] - 0.64508) <= 0.005, "within 0.005 of 0.64508 (MTEB)"),
        *[
            (name, results[name]["ndcg_at_10"] > best_single, f"> {best_single:.4f} (best of BM25 and dense)")
            for name in ("hybrid rrf (okapi + minilm)", "hybrid weighted minmax w_bm25=0.5")
        ],
    ]
    for name, ok, bound in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: nDCG@10 {results[name]['ndcg_at_10']:.4f} {bound}")
    failures = sum(not ok for _, ok, _ in checks)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
