"""How a whole run's cost grows with the corpus: 1k, 10k, 100k and 1M synthetic passages.

Corpus: ``n`` BEIR-format documents of 60-140 words drawn from a Zipf(1.1) vocabulary of 50,000
made-up words (titles of 3 words), written once per size (``--data DIR`` keeps and reuses them);
recursive-512 chunking makes ~2.18 passages per document, so ``--sizes 460,4600,46000,460000``
gives 1k-1M passages. ``--queries`` queries (1,000), each 6 words of one random document, which is
its one relevant document. Each size runs in a fresh process, first the stages called directly
as a run calls them, then, with their structures freed, a whole run:

* load: ``load_beir``; chunking: recursive 512/64 (``chunk_corpus``);
* BM25: ``BM25Retriever.index`` (tokenise, postings) and ``search`` of all queries at k=100;
* FAISS: ``DenseRetriever`` (flat) over precomputed random 384-dim unit vectors (encoding is
  replaced, so the index and search are timed, not MiniLM), ``index`` and ``search`` at k=100;
* metrics and CIs: ``evaluate_run`` at k 1/3/5/10 over the BM25 rankings and the bootstrap CIs
  (2,000 resamples) a run logs;
* whole run: ``run_job`` of ``retrieval=bm25`` with a fresh stage cache and sqlite store, and its
  parts: prepare (load, chunk, cache the chunks, qrels), retrieval, evaluation, ``save_local``
  (the run folder), MLflow logging (``log_evaluation``: artifacts, per-query table, metrics) and
  the rest (building the pipeline, the store connection, the experiment); the bytes it logged.

Memory: the peak RSS (``VmHWM``, reset before each stage) during each direct stage and during
the whole run. Per-query cost (metrics, CIs, per-query logging, artifacts) follows the number of
queries and k, not the corpus; it is measured at every size to show that. Prints one row per size
(seconds, artifact MB, peak MB, the load average range) and each stage's growth exponent between
neighbouring sizes; ``--save`` appends the rows to a JSON-lines file, ``--replot`` prints and
plots saved rows, ``--plot`` writes a PNG (log-log seconds per stage against passages). Each
row keeps the folder of the whole run's store (``store``): ``bench_ui_views --store`` times the
MLflow UI on it.

    python -m benchmarks.bench_whole_scale --sizes 460,4600,46000,460000 --data /tmp/scale-data \
        --save rows.jsonl [--plot docs/images/whole_run_scaling.png]
"""

from __future__ import annotations

import argparse
import json
import os
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
VOCABULARY, DIM, K = 50_000, 384, 100
STAGES = ("load", "chunking", "bm25_index", "bm25_search", "faiss_index", "faiss_search", "metrics_cis",
          "run_prepare", "run_retrieval", "run_evaluation", "save_local", "mlflow_logging", "run_other", "whole_run")


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


def peak_rss_mb(reset: bool = False) -> float:
    """The process' peak resident memory (``VmHWM``) so far, in MB; ``reset``: start a new peak
    from the current resident size (Linux ``clear_refs`` 5), so each phase gets its own peak."""
    peak = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmHWM:")) / 1024
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    return peak


def measure(folder: Path, n_queries: int) -> dict:
    """Every stage on the corpus in ``folder``, in this process (run by :func:`main` per size):
    first the stages called directly, then, with their structures freed, a whole ``run_job``."""
    import gc

    import ragexp.jobs.job as job_module
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.chunking import make_chunker
    from ragexp.config.compose import compose_config
    from ragexp.data.loaders.beir import load_beir
    from ragexp.evaluation.runner import _confidence_intervals
    from ragexp.datamodel import Qrels
    from ragexp.metrics.evaluate import evaluate_run
    from ragexp.runtime import progress
    from reference_pipelines.bm25 import BM25Retriever
    from reference_pipelines.dense import DenseRetriever

    progress.set_enabled(False)
    seconds: dict[str, float] = {}
    loads: dict[str, float] = {}
    peaks: dict[str, float] = {}  # the process' peak RSS during each stage called directly, MB

    def timed(stage, fn, peak=True):
        if peak:
            peak_rss_mb(reset=True)
        started = time.perf_counter()
        value = fn()
        seconds[stage] = time.perf_counter() - started
        loads[stage] = os.getloadavg()[0]
        if peak:
            peaks[stage] = peak_rss_mb()
        return value

    baseline_mb = peak_rss_mb(reset=True)
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
    qrels = Qrels({item.id: {e.doc_id: e.grade for e in item.evidence} for item in evalset.items})

    def metrics():
        evaluated = evaluate_run(run, qrels, [1, 3, 5, 10])
        return _confidence_intervals(evaluated.per_query, [1, 3, 5, 10], 2000)

    timed("metrics_cis", metrics)
    passages, documents = len(chunks), len(corpus)
    del corpus, evalset, chunks, bm25, dense, rankings, doc_of, run, qrels
    gc.collect()
    direct_peak_mb = max(peaks.values())

    def timing(stage, fn):  # wraps a function run_job calls, to time it inside the run
        def wrapped(*args, **kwargs):
            return timed(stage, lambda: fn(*args, **kwargs), peak=False)
        return wrapped

    job_module.save_local = timing("save_local", job_module.save_local)
    job_module.log_evaluation = timing("mlflow_logging", job_module.log_evaluation)
    work = Path(tempfile.mkdtemp(prefix="ragexp-whole-scale-"))
    cfg = compose_config(["dataset=beir", f"dataset.path={folder}", "chunking=recursive", "retrieval=bm25", "progress=false",
                          f"cache_dir={work}/cache", f"tracking.uri=sqlite:///{work}/mlflow.db", "tracking.experiment=scale"])
    os.chdir(work)  # MLflow puts a sqlite store's artifacts in ./mlruns
    job = timed("whole_run", lambda: job_module.run_job(job_spec(cfg), output_dir=work / "output"))
    whole = seconds["whole_run"]
    timings = job.output.results.meta["timings"]
    seconds.update(run_prepare=timings["prepare_s"], run_retrieval=timings["retrieval_s"],
                   run_evaluation=timings["evaluation_s"])
    seconds["run_other"] = whole - sum(seconds[s] for s in ("run_prepare", "run_retrieval", "run_evaluation",
                                                              "save_local", "mlflow_logging"))
    mlruns = sorted(f for f in (work / "mlruns").rglob("*") if f.is_file()) if (work / "mlruns").is_dir() else []
    local = sorted(f for f in (work / "output").rglob("*") if f.is_file())
    return {"passages": passages, "documents": documents, "queries": len(queries), "seconds": seconds, "loads": loads,
            "whole_run_s": whole, "run_id": job.run_id, "store": str(work),
            "artifact_bytes": sum(f.stat().st_size for f in mlruns + local),
            "artifact_files": {str(f.relative_to(work)): f.stat().st_size for f in mlruns + local},
            "baseline_rss_mb": baseline_mb, "peak_rss_mb": peaks, "direct_peak_rss_mb": direct_peak_mb,
            "run_peak_rss_mb": peaks["whole_run"],
            "load": os.getloadavg()[0]}


DIRECT = STAGES[:7]


def faiss_parts(folder: Path) -> None:
    """The FAISS index stage's parts on the corpus in ``folder``, timed one by one: the chunk table
    (ids sorted for tie order, fingerprint), the stand-in encoder's vectors, the flat index's add."""
    import faiss

    from ragexp.chunking import make_chunker
    from ragexp.data.loaders.beir import load_beir
    from ragexp.runtime import progress
    from reference_pipelines.ranking import ChunkTable

    progress.set_enabled(False)
    corpus, _ = load_beir(folder, split="test")
    chunks = make_chunker({"name": "recursive", "size": 512, "overlap": 64}).chunk_corpus(corpus)
    parts = {}
    started = time.perf_counter()
    table = ChunkTable.from_chunks(chunks, True)
    parts["chunk table"] = time.perf_counter() - started
    started = time.perf_counter()
    vectors = RandomVectors()._vectors(table.texts)
    parts["random vectors"] = time.perf_counter() - started
    started = time.perf_counter()
    faiss.IndexFlatIP(DIM).add(vectors)
    parts["flat add"] = time.perf_counter() - started
    print(f"{len(chunks)} passages: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in parts.items())
          + f" (load {os.getloadavg()[0]:.2f})")


def plot(rows: list[dict], path: Path) -> bool:
    """Three log-log panels against passages: the stages called directly, the parts of a whole
    run, and the peak memory; a dashed line of slope 1 (linear) in the first two."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, panels = plt.subplots(1, 3, figsize=(15, 4.8))
    sizes = [row["passages"] for row in rows]
    for axes, stages, title in ((panels[0], DIRECT, "stages called directly"),
                                (panels[1], STAGES[7:], "a whole bm25 run (run_job) and its parts")):
        for stage in stages:
            style = {"marker": "s", "color": "black", "linewidth": 2} if stage == "whole_run" else {"marker": "o"}
            axes.plot(sizes, [max(row["seconds"][stage], 1e-3) for row in rows], label=stage, **style)
        top = max(row["seconds"][stage] for row in rows for stage in stages)
        axes.plot([sizes[0], sizes[-1]], [top * sizes[0] / sizes[-1], top], color="grey", linestyle="--", label="linear")
        axes.set(xscale="log", yscale="log", xlabel="passages", ylabel="seconds", title=title)
    panels[2].plot(sizes, [row["direct_peak_rss_mb"] for row in rows], marker="o", label="direct stages (BM25 + FAISS held)")
    panels[2].plot(sizes, [row["run_peak_rss_mb"] for row in rows], marker="s", color="black", label="whole bm25 run")
    panels[2].set(xscale="log", yscale="log", xlabel="passages", ylabel="peak RSS, MB", title="peak memory")
    for axes in panels:
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(f"ragexp: cost vs corpus size (synthetic BEIR corpus, {rows[0]['queries']} queries, k={K})")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return True


def print_rows(rows: list[dict]) -> None:
    """The stage seconds per size, then each stage's growth exponent between neighbouring sizes
    (``log(t2/t1) / log(n2/n1)``: 1 is linear)."""
    print(f"{'docs':>8s} {'passages':>9s} " + " ".join(f"{s[:12]:>12s}" for s in STAGES)
          + f" {'artifacts MB':>12s} {'direct MB':>9s} {'run MB':>7s} {'load':>11s}")
    for row in rows:
        loads = row["loads"].values()
        print(f"{row['documents']:8d} {row['passages']:9d} " + " ".join(f"{row['seconds'][s]:12.2f}" for s in STAGES)
              + f" {row['artifact_bytes'] / 1e6:12.2f} {row['direct_peak_rss_mb']:9.0f} {row['run_peak_rss_mb']:7.0f}"
              f" {min(loads):5.2f}-{max(loads):<5.2f}")
        print(f"{'':18s} peak RSS MB during: " + ", ".join(f"{s} {mb:.0f}" for s, mb in row["peak_rss_mb"].items()))
    for low, high in zip(rows, rows[1:]):
        ratio = high["passages"] / low["passages"]
        print(f"exponent {low['passages']} -> {high['passages']}: " + ", ".join(
            f"{s} {math.log(high['seconds'][s] / low['seconds'][s]) / math.log(ratio):.2f}" for s in STAGES))


def markdown(rows: list[dict]) -> None:
    """The rows as docs/scale.md's two Markdown tables: the direct stages, then the whole run."""
    for stages, extra in ((DIRECT, "peak MB"), (STAGES[7:], "artifacts MB | peak MB")):
        names = ["loading" if stage == "load" else stage.replace("_", " ") for stage in stages]
        print(f"\n| passages (documents) | load avg | {' | '.join(names)} | {extra} |")
        print("|---" * (len(stages) + 3 + extra.count("|")) + "|")
        for row in rows:
            loads = [row["loads"][stage] for stage in stages if stage in row["loads"]]
            cells = [f"{row['seconds'][stage]:.2f}" for stage in stages]
            tail = (f"{row['direct_peak_rss_mb']:,.0f}" if stages is DIRECT
                    else f"{row['artifact_bytes'] / 1e6:.1f} | {row['run_peak_rss_mb']:,.0f}")
            print(f"| {row['passages']:,} ({row['documents']:,}) | {min(loads):.1f}-{max(loads):.1f} | {' | '.join(cells)} | {tail} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="documents per corpus (about 2.2 passages each)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--data", type=Path, help="keep the corpora here and reuse those already written")
    parser.add_argument("--write-only", action="store_true", help="write the corpora to --data, measure nothing")
    parser.add_argument("--save", type=Path, help="append each size's row to this JSON-lines file")
    parser.add_argument("--replot", type=Path, nargs="+", help="measure nothing: print and plot rows saved by --save")
    parser.add_argument("--markdown", action="store_true", help="also print the rows as a Markdown table")
    parser.add_argument("--faiss-parts", type=Path, nargs="+", help="time the FAISS index stage's parts on these corpora")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.faiss_parts:
        for folder in args.faiss_parts:
            faiss_parts(folder)
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries)))
        return
    if args.replot:
        rows = sorted((json.loads(line) for path in args.replot for line in path.read_text().splitlines() if line),
                      key=lambda row: row["passages"])
    else:
        root = args.data or Path(tempfile.mkdtemp(prefix="ragexp-whole-scale-data-"))
        rows = []
        for n in (int(size) for size in args.sizes.split(",")):
            if not (root / str(n)).is_dir():  # written aside, then renamed: a cut-short write is never reused
                shutil.rmtree(partial := root / f"{n}.partial", ignore_errors=True)
                write_corpus(partial, n, args.queries)
                partial.rename(root / str(n))
            if args.write_only:
                continue
            done = subprocess.run([sys.executable, "-m", "benchmarks.bench_whole_scale", "--measure", str(root / str(n)),
                                   "--queries", str(args.queries)], env=ENV, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"size {n} failed:\n{done.stderr[-3000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            if args.save:
                with args.save.open("a") as saved:
                    saved.write(json.dumps(rows[-1]) + "\n")
            print_rows(rows[-1:])
        if args.write_only:
            return
    print_rows(rows)
    if args.markdown:
        markdown(rows)
    if args.plot and plot(rows, args.plot):
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
