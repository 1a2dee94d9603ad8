"""A 24-config sweep on the demo dataset vs the work no sweep can avoid, measured in one run.

The sweep is 3 chunkings x 2 retrievals (dense, hybrid_rrf) x 2 rerankers (none, embedding) x
2 k-lists, run through the real CLI (``ragexp run -m``) with a fresh stage cache and a fresh sqlite
store. It needs one corpus embedding per distinct (chunking x model): every chunking's chunks
encoded once by the first-stage model (all-MiniLM-L6-v2) and once by the reranker's model
(paraphrase-MiniLM-L3 ONNX). Two yardsticks, both measured here:

* unavoidable work: a bare script in a fresh process that does only what any sweep must do:
  start Python, import the libraries, load each model once, embed each chunking's chunks and the
  queries once per model. Target: sweep wall time <= 1.2 x this, where "this" is the mean of the
  bare runs just before and just after the sweep (the shared machine's speed drifts over minutes).
* embeddings only: the corpus embeddings alone, timed inside that script after the model loads
  (the stricter yardstick of earlier releases, printed for comparison).

    python -m benchmarks.bench_sweep [--workdir DIR] [--repeats N]

``--backends torch,onnx`` instead times cold sweeps (fresh cache, store and ONNX exports already
made) with ``embedding.backend`` set to each, interleaved per repeat, and prints their ratio:
the encoder's share of a sweep before (torch) and after (ONNX, ragexp's default). Both run with
the text-vector cache (each distinct chunk text encoded once per model). ``--sweep small`` runs
4 of the 24 configs (chunking=recursive,markdown x reranker=none,embedding; dense; one k-list)
where 24 cold sweeps per backend do not fit the time at hand.

    python -m benchmarks.bench_sweep --backends torch,onnx [--sweep small] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ragexp.chunking import make_chunker
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import load_evalset
from reference_pipelines.encoders import build_encoder

CHUNKINGS = {
    "fixed": {"name": "fixed", "unit": "chars", "size": 512, "overlap": 64},
    "recursive": {"name": "recursive", "size": 512, "overlap": 64},
    "markdown": {"name": "markdown", "max_size": 1024},
}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
MODELS = {
    "minilm": {"model": "minilm", "max_seq_length": 256, "batch_size": 16},
    "paraphrase-minilm-l3": {"model": "paraphrase-minilm-l3", "max_seq_length": 128, "batch_size": 16},
}


def bare_sweep_work() -> None:
    """The unavoidable work (module docstring), run in its own process by :func:`unavoidable`;
    prints one JSON line with the corpus-embedding timings."""
    corpus_dir, evalset_path = demo_paths()
    corpus = load_corpus(corpus_dir)
    queries = [item.query for item in load_evalset(evalset_path, corpus).items]
    rows = []
    for model_name, spec in MODELS.items():
        encoder = build_encoder(spec)
        encoder.encode_queries(queries)  # loads the model
        for chunking_name, chunking in CHUNKINGS.items():
            chunks = make_chunker(chunking).chunk_corpus(corpus)
            started = time.perf_counter()
            encoder.encode_passages([c.text_with_title() for c in chunks])
            rows.append((chunking_name, model_name, len(chunks), time.perf_counter() - started))
    print(json.dumps(rows))


def unavoidable() -> tuple[float, list[tuple[str, str, int, float]]]:
    """Wall time of :func:`bare_sweep_work` in a fresh process, and its embedding rows."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_sweep", "--bare"], env=ENV, check=True,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    return wall, [tuple(row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


SWEEPS = {
    "full": ["chunking=fixed,recursive,markdown", "retrieval=dense,hybrid_rrf", "reranker=none,embedding",
             "eval.ks=[1,3,5,10],[5,10,20]"],
    "small": ["chunking=recursive,markdown", "retrieval=dense", "reranker=none,embedding"],
}


def sweep_seconds(workdir: Path, sweep: str = "full", extra: Sequence[str] = ()) -> float:
    command = [
        sys.executable, "-m", "ragexp.cli", "run", "-m", *SWEEPS[sweep], *extra,
        "progress=false", f"cache_dir={workdir}/cache",
        f"tracking.uri=sqlite:///{workdir}/mlflow.db", "tracking.experiment=bench-sweep",
        f"hydra.sweep.dir={workdir}/multirun",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=ENV, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the sweep in {workdir} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def compare_backends(workdir: Path, backends: list[str], sweep: str, repeats: int) -> None:
    """Cold sweeps per ``embedding.backend``, interleaved (the order alternates by repeat)."""
    seconds: dict[str, list[float]] = {backend: [] for backend in backends}
    for repeat in range(1, repeats + 1):
        for backend in backends if repeat % 2 else reversed(backends):
            (folder := workdir / f"repeat-{repeat}-{backend}").mkdir(parents=True, exist_ok=False)
            seconds[backend].append(sweep_seconds(folder, sweep, [f"embedding.backend={backend}"]))
            print(f"repeat {repeat}: {sweep} sweep, embedding.backend={backend}: {seconds[backend][-1]:.1f} s "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    first = statistics.median(seconds[backends[0]])
    for backend in backends:
        median = statistics.median(seconds[backend])
        print(f"{sweep} cold sweep, embedding.backend={backend}: median {median:.1f} s, {first / median:.2f}x vs {backends[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=1,
                        help="sweeps, each between two bare runs (repeats + 1 bare runs); the median ratio is reported")
    parser.add_argument("--backends", help="comma-separated embedding.backend values to compare (see the docstring)")
    parser.add_argument("--sweep", choices=sorted(SWEEPS), default="full")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare_sweep_work()
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragexp-bench-sweep-"))
    if args.backends:
        compare_backends(workdir, args.backends.split(","), args.sweep, args.repeats)
        return
    ratios, before_ratios, embedding_ratios = [], [], []
    bare_before, rows_before = unavoidable()
    for repeat in range(1, args.repeats + 1):
        (folder := workdir / f"repeat-{repeat}").mkdir(parents=True, exist_ok=False)
        total = sweep_seconds(folder)
        bare_after, rows_after = unavoidable()
        # The shared machine's speed drifts over minutes: a sweep is compared with the mean of the
        # bare runs just before and just after it, which cancels a linear drift.
        bare = (bare_before + bare_after) / 2
        embeddings = (sum(row[3] for row in rows_before) + sum(row[3] for row in rows_after)) / 2
        print(f"== repeat {repeat}/{args.repeats}\ncorpus embeddings inside the bare script (before / after the sweep):")
        for (chunking, model, n, seconds), after in zip(rows_before, rows_after):
            print(f"  {chunking:10s} {model:22s} {n:5d} chunks  {seconds:7.2f} s / {after[3]:7.2f} s")
        ratios.append(total / bare)
        before_ratios.append(total / bare_before)
        embedding_ratios.append(total / embeddings)
        print(f"24-config sweep (ragexp run -m, fresh cache and store): {total:6.1f} s")
        print(f"unavoidable work (bare script, fresh process):         {bare:6.1f} s  ratio {total / bare:.2f}x "
              f"(before {bare_before:.1f} s, after {bare_after:.1f} s)")
        print(f"corpus embeddings only:                                {embeddings:6.1f} s  ratio {total / embeddings:.2f}x")
        print(f"per-config overhead beyond the unavoidable work: {(total - bare) / 24:.2f} s\n", flush=True)
        bare_before, rows_before = bare_after, rows_after
    print(f"median ratio over {args.repeats} repeat(s): sweep / unavoidable work {statistics.median(ratios):.2f}x "
          f"(target <= 1.2x; all: {', '.join(f'{r:.2f}' for r in ratios)}); against the bare run before the "
          f"sweep only {statistics.median(before_ratios):.2f}x (all: {', '.join(f'{r:.2f}' for r in before_ratios)}); "
          f"sweep / embeddings only {statistics.median(embedding_ratios):.2f}x")


if __name__ == "__main__":
    main()
