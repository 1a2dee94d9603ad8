"""FAISS batch search: as shipped vs :func:`reference_pipelines.dense.faiss_threads`.

300 queries x 50,000 unit vectors x 384 dims, ``IndexFlatIP``, k = 100. faiss 1.15 ships
``distance_compute_blas_threshold = 128000`` (queries per batch), so a batch never reaches the
sgemm path; ``faiss_threads`` sets it to ``BLAS_THRESHOLD`` and the OpenMP thread count.
Both settings must return the same neighbours. Run: ``python -m benchmarks.bench_faiss_search``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import faiss
import numpy as np

from reference_pipelines.dense import BLAS_THRESHOLD, faiss_threads


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((args.vectors, 384), dtype=np.float32)
    queries = rng.standard_normal((args.queries, 384), dtype=np.float32)
    faiss.normalize_L2(corpus)
    faiss.normalize_L2(queries)
    index = faiss.IndexFlatIP(384)
    index.add(corpus)
    shipped_threshold, shipped_threads = faiss.cvar.distance_compute_blas_threshold, faiss.omp_get_max_threads()
    print(f"{args.queries} queries x {args.vectors} vectors x 384 d, k=100, best of {args.repeats}; {os.cpu_count()} cores\n")

    rows = []
    faiss.cvar.distance_compute_blas_threshold = shipped_threshold
    faiss.omp_set_num_threads(shipped_threads)
    baseline = best_of(args.repeats, lambda: index.search(queries, 100))
    _, expected = index.search(queries, 100)
    rows.append((f"as shipped (threshold {shipped_threshold}, {shipped_threads} threads)", baseline))
    for threads in sorted({1, os.cpu_count() or 1}):
        with faiss_threads(threads):
            seconds = best_of(args.repeats, lambda: index.search(queries, 100))
            _, found = index.search(queries, 100)
        assert (found == expected).mean() > 0.999, "BLAS and scan paths disagree on the neighbours"
        rows.append((f"faiss_threads (threshold {BLAS_THRESHOLD}, {threads} threads)", seconds))

    header = f"{'setting':52s} {'search s':>9s} {'speed-up':>9s}"
    print(header + "\n" + "-" * len(header))
    for name, seconds in rows:
        print(f"{name:52s} {seconds:9.3f} {baseline / seconds:8.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
