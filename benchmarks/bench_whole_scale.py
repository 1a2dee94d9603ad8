"""How a whole run's cost grows with the corpus: 1k, 10k, 100k (and 1M) synthetic passages.

Corpus: ``n`` BEIR-format documents of 60-140 words drawn from a Zipf(1.1) vocabulary of 50,000
made-up words (titles of 3 words), written once per size; ``--queries`` queries (1,000), each 6
words of one random document, which is its one relevant document. Each size runs in a fresh
process (its peak memory is the process' ``ru_maxrss``), stage by stage as a run calls them:

* load: ``load_beir``; chunking: recursive 512/64 (``chunk_corpus``);
* BM25: ``BM25Retriever.index`` (tokenise, postings) and ``search`` of all queries at k=100;
* FAISS: ``DenseRetriever`` (flat) over precomputed random 384-dim unit vectors (encoding is
  replaced, so the index and search are timed, not MiniLM), ``index`` and ``search`` at k=100;
* metrics and CIs: ``evaluate_run`` at k 1/3/5/10 over the BM25 rankings and the bootstrap CIs
  (2,000 resamples) a run logs;
* whole run: ``run_job`` of ``retrieval=bm25`` with a fresh stage cache and sqlite store: its wall
  time, the part outside retrieval and evaluation (loading, chunking, MLflow logging, plots,
  per-query table), and the bytes it logged as artifacts.

Per-query cost (metrics, CIs, per-query logging, artifacts) follows the number of queries and k,
not the corpus; it is measured at every size to show that. Prints one row per size and writes
``--plot`` (PNG, log-log seconds per stage against passages) when matplotlib is installed.

    python -m benchmarks.bench_whole_scale [--sizes 1000,10000,100000] [--queries 1000] [--plot docs/images/whole_run_scaling.png]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
VOCABULARY, DIM, K = 50_000, 384, 100
STAGES = ("load", "chunking", "bm25_index", "bm25_search", "faiss_index", "faiss_search", "metrics_cis", "run_outside")


def write_corpus(folder: Path, n: int, n_queries: int) -> None:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of ``n`` synthetic documents."""
    rng = np.random.default_rng(n)
    words = np.array([f"w{i:05d}x" for i in range(VOCABULARY)])
    (folder / "qrels").mkdir(parents=True)
    doc_words = []
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for start in range(0, n, 10_000):
            count = min(10_000, n - start)
            lengths = rng.integers(60, 141, count)
            ids = (rng.zipf(1.1, int(lengths.sum())) - 1) % VOCABULARY
            for i, chunk in enumerate(np.split(words[ids], np.cumsum(lengths)[:-1])):
                doc = start + i
                text = " ".join(chunk)
                if doc < n_queries * 4:
                    doc_words.append(chunk)
                out.write(json.dumps({"_id": f"d{doc}", "title": " ".join(chunk[:3]), "text": text}) + "\n")
    gold = rng.choice(len(doc_words), n_queries, replace=len(doc_words) < n_queries)
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as queries, open(folder / "qrels" / "test.tsv", "w") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for q, doc in enumerate(gold):
            chosen = rng.choice(doc_words[doc], 6, replace=False)
            queries.write(json.dumps({"_id": f"q{q}", "text": " ".join(chosen)}) + "\n")
            qrels.write(f"q{q}\td{doc}\t1\n")


class RandomVectors:
    """An encoder stand-in: a fixed random unit vector per distinct text (module docstring)."""

    identity = {"encoder": "random-vectors"}

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def _vectors(self, texts) -> np.ndarray:
        vectors = self.rng.standard_normal((len(texts), DIM), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    encode_queries = encode_passages = _vectors


def measure(folder: Path, n_queries: int) -> dict:
    """Every stage on the corpus in ``folder``, in this process (run by :func:`main` per size)."""
    from ragexp.chunking import make_chunker
    from ragexp.config.compose import compose_config
    from ragexp.data.loaders.beir import load_beir
    from ragexp.evaluation.runner import _confidence_intervals
    from ragexp.jobs.job import run_job
    from ragexp.metrics.evaluate import evaluate_run
    from ragexp.runtime import progress
    from reference_pipelines.bm25 import BM25Retriever
    from reference_pipelines.dense import DenseRetriever

    progress.set_enabled(False)
    seconds: dict[str, float] = {}

    def timed(stage, fn):
        started = time.perf_counter()
        value = fn()
        seconds[stage] = time.perf_counter() - started
        return value

    corpus, evalset = timed("load", lambda: load_beir(folder, split="test"))
    chunks = timed("chunking", lambda: make_chunker({"name": "recursive", "size": 512, "overlap": 64}).chunk_corpus(corpus))
    queries = [item.query for item in evalset.items]
    bm25 = BM25Retriever()
    timed("bm25_index", lambda: bm25.index(chunks))
    rankings = timed("bm25_search", lambda: bm25.search(queries, K))
    dense = DenseRetriever(encoder=RandomVectors())
    timed("faiss_index", lambda: dense.index(chunks))
    timed("faiss_search", lambda: dense.search(queries, K))
    doc_of = {chunk.id: chunk.doc_id for chunk in chunks}
    run = {item.id: list({doc_of[cid]: (doc_of[cid], score) for cid, score in reversed(ranking)}.values())[::-1]
           for item, ranking in zip(evalset.items, rankings)}  # each document at its best chunk's rank
    qrels = {item.id: {e.doc_id: e.grade for e in item.evidence} for item in evalset.items}

    def metrics():
        evaluated = evaluate_run(run, qrels, [1, 3, 5, 10])
        return _confidence_intervals(evaluated.per_query, [1, 3, 5, 10], 2000)

    timed("metrics_cis", metrics)
    work = Path(tempfile.mkdtemp(prefix="ragexp-whole-scale-"))
    cfg = compose_config(["dataset=beir", f"dataset.path={folder}", "chunking=recursive", "retrieval=bm25", "progress=false",
                          f"cache_dir={work}/cache", f"tracking.uri=sqlite:///{work}/mlflow.db", "tracking.experiment=scale"])
    os.chdir(work)  # MLflow puts a sqlite store's artifacts in ./mlruns
    started = time.perf_counter()
    job = run_job(cfg, output_dir=work / "output", overrides=[])
    whole = time.perf_counter() - started
    timings = job.output.results.meta["timings"]
    seconds["run_outside"] = whole - timings.get("retrieval_s", 0.0) - timings.get("evaluation_s", 0.0)
    artifacts = sum(f.stat().st_size for f in (work / "mlruns").rglob("*") if f.is_file()) if (work / "mlruns").is_dir() else 0
    artifacts += sum(f.stat().st_size for f in (work / "output").rglob("*") if f.is_file())
    return {"passages": len(chunks), "documents": len(corpus), "queries": len(queries), "seconds": seconds,
            "whole_run_s": whole, "artifact_bytes": artifacts, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load": os.getloadavg()[0]}


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(7, 4.5))
    sizes = [row["passages"] for row in rows]
    for stage in STAGES:
        axes.plot(sizes, [max(row["seconds"][stage], 1e-4) for row in rows], marker="o", label=stage)
    axes.plot(sizes, [row["whole_run_s"] for row in rows], marker="s", color="black", label="whole bm25 run")
    axes.set(xscale="log", yscale="log", xlabel="passages (recursive-512 chunks)", ylabel="seconds",
             title=f"ragexp stage cost vs corpus size ({rows[0]['queries']} queries, k={K})")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries)))
        return
    root = Path(tempfile.mkdtemp(prefix="ragexp-whole-scale-data-"))
    rows = []
    header = f"{'docs':>8s} {'passages':>9s} " + " ".join(f"{s:>12s}" for s in STAGES) + f" {'whole s':>8s} {'artifacts MB':>12s} {'peak MB':>8s} {'load':>5s}"
    print(header)
    for n in (int(size) for size in args.sizes.split(",")):
        write_corpus(root / str(n), n, args.queries)
        done = subprocess.run([sys.executable, "-m", "benchmarks.bench_whole_scale", "--measure", str(root / str(n)),
                               "--queries", str(args.queries)], env=ENV, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"size {n} failed:\n{done.stderr[-3000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{row['documents']:8d} {row['passages']:9d} " + " ".join(f"{row['seconds'][s]:12.2f}" for s in STAGES)
              + f" {row['whole_run_s']:8.1f} {row['artifact_bytes'] / 1e6:12.2f} {row['peak_rss_mb']:8.0f} {row['load']:5.2f}", flush=True)
    print(json.dumps(rows))
    if args.plot and plot(rows, args.plot):
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
