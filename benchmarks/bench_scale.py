"""Scale: FAISS ``flat`` vs ``hnsw`` vs ``ivf`` through ``DenseRetriever`` on a 200k-chunk corpus.

The corpus is ``--n`` unit vectors of 384 dims from a two-level Gaussian mixture: ``n/80`` random
topic directions, ``n/4`` leaves around random topics, points around random leaves, plus one
direction every vector shares (random pairs have cosine ~0.1, as MiniLM embeddings do); queries
are fresh draws. ``--regime`` sets the noise: ``isotropic`` (all 384 dims: high intrinsic
dimension, hard for approximate search) or ``low-rank`` (a random 32-dim subspace per topic: low
intrinsic dimension, easier). Real embeddings lie between the two. Fitted at 4,000 vectors
against MiniLM-encoded SciFact sentences: recall@10 of IVF (102 lists) at ``nprobe`` 1/4/16 and of
a light HNSW (M=16, ef=10), and the mean top-1 cosine, are

    SciFact   0.43 / 0.71 / 0.91, HNSW 0.83, top-1 0.56
    isotropic 0.56 / 0.72 / 0.86, HNSW 0.75, top-1 0.56
    low-rank  0.44 / 0.66 / 0.81, HNSW 0.92, top-1 0.57

A one-level mixture of well-separated clusters gives every index a recall of 1.0 and says nothing.
``--real N`` instead encodes the first ``N`` SciFact sentences and ``--queries`` SciFact queries
with the ``minilm`` encoder (once; the vectors go through the stage cache).

Every index type is built and searched by :class:`reference_pipelines.dense.DenseRetriever`
(``index()`` and ``search()`` as a run calls them: chunk table, index build, for ``hnsw``/``ivf``
the serialise/deserialise round trip, score-tie handling, ``top_k`` per query). Only encoding is
replaced: a :class:`PrecomputedEncoder` returns the vectors generated up front, so build times
are index times, not MiniLM times. Each index type runs in a fresh subprocess; its peak memory is
``VmHWM`` (reset through ``/proc/self/clear_refs`` just before ``index()``) minus the resident
size before it — tracemalloc cannot see FAISS' C++ allocations.

Columns: build s = wall time of ``index()`` (cpu s beside it: CPU time of all the process'
threads, which a loaded machine does not inflate); peak MB = memory high-water mark during
``index()`` above the data already loaded; kept MB = resident growth that stays after it;
search s = one ``search()`` of all queries at ``k`` (wall, then CPU); q/s = queries per wall
second; recall@k = mean over queries of ``|top-k ∩ flat top-k| / k`` (flat is exact, so this is
the recall the approximation costs).

Run: ``python -m benchmarks.bench_scale [--n 200000] [--queries 1000] [--real N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import REPO, shared_data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragexp.datamodel import Chunk  # noqa: E402
from reference_pipelines.dense import INDEX_TYPES, DenseRetriever, auto_nlist  # noqa: E402

DIM = 384
PASSAGES_FILE = "passages.npy"
QUERIES_FILE = "queries.npy"
# The synthetic corpus (see the module docstring): topics -> leaves -> points.
POINTS_PER_LEAF = 4
LEAVES_PER_TOPIC = 20
SHARED_DIRECTION_WEIGHT = 0.33  # a direction all vectors share: mean cosine of random pairs ~ 0.1
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class PrecomputedEncoder:
    """An :class:`~reference_pipelines.encoders.Encoder` over vectors computed up front:
    ``passage i`` / ``query j`` map to row ``i`` / ``j``."""

    def __init__(self, passages: np.ndarray, queries: np.ndarray, source: str) -> None:
        self.passages, self.queries = passages, queries
        self.identity = {"encoder": "precomputed", "source": source}

    @staticmethod
    def _rows(vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        rows = [int(text.rsplit(" ", 1)[1]) for text in texts]
        return vectors if rows == list(range(len(vectors))) else vectors[rows]

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(self.passages, texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(self.queries, texts)


@dataclass(frozen=True)
class Regime:
    """How the synthetic corpus spreads around its centres: ``noise_rank`` 0 = isotropic noise in all
    384 dims (high intrinsic dimension: hard for ANN), ``r`` = noise in a random ``r``-dim subspace per
    topic (low intrinsic dimension, as real embeddings have: easier). Cosines are to the parent centre."""

    noise_rank: int
    leaf_topic_cosine: float
    point_leaf_cosine: float


# Both fitted at 4,000 vectors against MiniLM-encoded SciFact sentences (module docstring).
REGIMES = {"isotropic": Regime(0, 0.4, 0.7), "low-rank": Regime(32, 0.3, 0.6)}


def synthetic_vectors(n: int, n_queries: int, regime: Regime) -> tuple[np.ndarray, np.ndarray, str]:
    """Topics -> leaves -> points, plus one shared direction (module docstring)."""
    rng = np.random.default_rng(0)
    n_leaves = max(1, n // POINTS_PER_LEAF)
    n_topics = max(1, n_leaves // LEAVES_PER_TOPIC)
    topics = rng.standard_normal((n_topics, DIM), dtype=np.float32)
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    bases = None  # per-topic noise subspaces, rows of norm ~1
    if regime.noise_rank:
        bases = rng.standard_normal((n_topics, regime.noise_rank, DIM), dtype=np.float32) / np.sqrt(DIM)

    def around(centres: np.ndarray, topic_of_row: np.ndarray, cosine: float) -> np.ndarray:
        """Unit vectors ``centres + tan(acos(cosine)) * noise`` with ``|noise| ~ 1``: cosine ~ ``cosine``."""
        out = np.empty_like(centres)
        for start in range(0, len(centres), 2_000):
            rows = slice(start, start + 2_000)
            if bases is None:
                noise = rng.standard_normal(centres[rows].shape, dtype=np.float32) / np.sqrt(DIM)
            else:
                weights = rng.standard_normal((len(centres[rows]), regime.noise_rank), dtype=np.float32)
                noise = np.einsum("mr,mrd->md", weights / np.sqrt(regime.noise_rank), bases[topic_of_row[rows]])
            block = centres[rows] + np.tan(np.arccos(cosine)) * noise
            out[rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return out

    leaf_topic = rng.integers(0, n_topics, n_leaves)
    leaves = around(topics[leaf_topic], leaf_topic, regime.leaf_topic_cosine)
    shared = rng.standard_normal(DIM).astype(np.float32)
    shared *= SHARED_DIRECTION_WEIGHT / np.linalg.norm(shared)

    def draw(m: int) -> np.ndarray:
        leaf = rng.integers(0, n_leaves, m)
        points = around(leaves[leaf], leaf_topic[leaf], regime.point_leaf_cosine) + shared
        return points / np.linalg.norm(points, axis=1, keepdims=True)

    source = f"synthetic 2-level mixture: {n} x {DIM}, {n_topics} topics, {n_leaves} leaves, {regime}"
    return draw(n), draw(n_queries), source


def scifact_vectors(n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The first ``n`` distinct SciFact sentences and ``n_queries`` queries, MiniLM-encoded (cached)."""
    from ragexp.data.loaders.jsonl import iter_jsonl_objects
    from ragexp.runtime.fingerprint import stable_hash
    from ragexp.runtime.stage_cache import StageCache
    from reference_pipelines.encoders import build_encoder

    root = shared_data_dir() / "scifact"
    if not (root / "corpus.jsonl").exists():
        raise SystemExit(f"--real needs SciFact at {root} (set RAGEXP_SHARED_DATA)")
    sentences: dict[str, None] = {}
    for _, doc in iter_jsonl_objects(root / "corpus.jsonl"):
        for sentence in _SENTENCE_END.split(doc.get("text", "")):
            if sentence.strip():
                sentences.setdefault(sentence.strip())
        if len(sentences) >= n:
            break
    passages_text = list(sentences)[:n]
    queries_text = [q["text"] for _, q in iter_jsonl_objects(root / "queries.jsonl")][:n_queries]
    encoder = build_encoder({"model": "minilm", "batch_size": 64})
    cache = StageCache()
    passages = cache.get_or_compute_array(
        "embeddings", {"encoder": encoder.identity, "texts": stable_hash(passages_text)},
        lambda: encoder.encode_passages(passages_text),
    )
    queries = cache.get_or_compute_array(
        "query-embeddings", {"encoder": encoder.identity, "queries": stable_hash(queries_text)},
        lambda: encoder.encode_queries(queries_text),
    )
    return passages, queries, f"SciFact: {len(passages_text)} sentences, {len(queries_text)} queries, minilm (384-d)"


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure_one(index_type: str, workdir: Path, k: int, search_params: dict) -> dict:
    """Child process: build ``index_type`` over the saved vectors, search, report (and save top-k rows)."""
    passages = np.load(workdir / PASSAGES_FILE)
    queries = np.load(workdir / QUERIES_FILE)
    encoder = PrecomputedEncoder(passages, queries, str(workdir))
    chunks = [Chunk(f"p{i}#chunk_0", f"p{i}", 0, 0, 1, f"passage {i}") for i in range(len(passages))]
    query_texts = [f"query {j}" for j in range(len(queries))]
    retriever = DenseRetriever(encoder=encoder, index=index_type, include_title=False, **search_params)

    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
    rss_before = _status_kb("VmRSS")
    started, cpu_started = time.perf_counter(), time.process_time()
    retriever.index(chunks)
    build_s, build_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    peak_kb, kept_kb = _status_kb("VmHWM") - rss_before, _status_kb("VmRSS") - rss_before

    started, cpu_started = time.perf_counter(), time.process_time()
    rankings = retriever.search(query_texts, k)
    search_s, search_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    row_of = {chunk.id: i for i, chunk in enumerate(chunks)}
    top = np.full((len(queries), k), -1, dtype=np.int64)
    for j, ranking in enumerate(rankings):
        top[j, : len(ranking)] = [row_of[cid] for cid, _ in ranking]
    np.save(workdir / f"top-{index_type}.npy", top)
    params = {"flat": "exact", "hnsw": f"M={retriever.hnsw_m} efC={retriever.hnsw_ef_construction} ef={retriever.ef_search}",
              "ivf": f"nlist={retriever.ivf_nlist or auto_nlist(len(passages))} nprobe={retriever.nprobe}"}[index_type]
    return {"index": index_type, "params": params, "build_s": build_s, "build_cpu_s": build_cpu_s,
            "peak_mb": peak_kb / 1024, "kept_mb": kept_kb / 1024, "search_s": search_s, "search_cpu_s": search_cpu_s}


def recall_against(exact: np.ndarray, approximate: np.ndarray, k: int) -> float:
    """Mean over queries of ``|approximate top-k ∩ exact top-k| / k``."""
    return float(np.mean([len(set(a[a >= 0]) & set(e)) / k for a, e in zip(approximate, exact)]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="corpus size in chunks (vectors)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--regime", choices=REGIMES, default="isotropic", help="synthetic corpus geometry")
    parser.add_argument("--real", type=int, default=0, metavar="N", help="use N MiniLM-encoded SciFact sentences")
    parser.add_argument("--indexes", default=",".join(INDEX_TYPES), help="comma-separated; flat always runs (the reference)")
    parser.add_argument("--ef-search", type=int, default=128, help="DenseRetriever ef_search (hnsw)")
    parser.add_argument("--nprobe", type=int, default=16, help="DenseRetriever nprobe (ivf)")
    parser.add_argument("--child", choices=INDEX_TYPES, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        search_params = {"ef_search": args.ef_search, "nprobe": args.nprobe}
        print(json.dumps(measure_one(args.child, args.workdir, args.k, search_params)))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(tmp)
        if args.real:
            passages, queries, source = scifact_vectors(args.real, args.queries)
        else:
            passages, queries, source = synthetic_vectors(args.n, args.queries, REGIMES[args.regime])
        np.save(workdir / PASSAGES_FILE, np.ascontiguousarray(passages, dtype=np.float32))
        np.save(workdir / QUERIES_FILE, np.ascontiguousarray(queries, dtype=np.float32))
        print(f"{source}; {len(queries)} queries at k={args.k}; {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f}; vectors {passages.nbytes / 2**20:.0f} MB")
        del passages, queries

        results = []
        for index_type in ["flat", *(t for t in INDEX_TYPES if t != "flat" and t in args.indexes.split(","))]:
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_scale", "--child", index_type, "--workdir", str(workdir),
                 "--k", str(args.k), "--ef-search", str(args.ef_search), "--nprobe", str(args.nprobe)],
                capture_output=True, text=True, check=False, cwd=REPO,
            )
            if proc.returncode != 0:
                raise SystemExit(f"{index_type} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"  {index_type}: done in {results[-1]['build_s'] + results[-1]['search_s']:.1f} s", flush=True)
        exact = np.load(workdir / "top-flat.npy")
        for row in results:
            row["recall"] = recall_against(exact, np.load(workdir / f"top-{row['index']}.npy"), args.k)

    n_queries = len(exact)
    header = (f"{'index':6s} {'params':24s} {'build s':>8s} {'cpu s':>8s} {'peak MB':>8s} {'kept MB':>8s} "
              f"{f'{n_queries} q s':>9s} {'cpu s':>8s} {'q/s':>8s} {f'recall@{args.k}':>10s}")
    print("\n" + header + "\n" + "-" * len(header))
    for row in results:
        print(f"{row['index']:6s} {row['params']:24s} {row['build_s']:8.1f} {row['build_cpu_s']:8.1f} {row['peak_mb']:8.0f} "
              f"{row['kept_mb']:8.0f} {row['search_s']:9.2f} {row['search_cpu_s']:8.2f} {n_queries / row['search_s']:8.0f} "
              f"{row['recall']:10.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
