"""Encoder paths on the demo's chunks, interleaved in one run: passages/s, tokens/s, and the
fraction of this machine's measured sgemm FLOP rate each reaches; with ``--part quality`` the
retrieval cost of each precision (SciFact nDCG@10, the demo's hit rate@5).

Paths (all-MiniLM-L6-v2, batch 64, max 256 tokens, the demo's recursive-512 chunks with titles,
``--every n``: every n-th of them):
torch fp32 with 2 intra-op threads (ragexp's encoder before ONNX) and with 1; ONNX Runtime fp32
and int8 (:mod:`ragexp.models.onnx_export`), each with token-length-sorted batches (ragexp's
default) and in input order. Every round runs each path once, the order rotating by round;
each path's median over rounds is reported, next to the load average.

Useful FLOPs of a BERT encoder for one text of ``n`` tokens (padding not counted, so sorting shows
as a higher rate): ``layers * (2 n (4 H^2 + 2 H I) + 4 n^2 H)`` (Q, K, V and output projections,
the two feed-forward products, attention scores and their weighted sum; H = 384, I = 1536,
6 layers). The machine's rate is numpy's float32 1024x1024 matmul (its BLAS, all owned cores),
best of 3, measured in every round: the fraction is useful FLOP/s / sgemm FLOP/s.

    python -m benchmarks.bench_encoders [--rounds 3] [--part speed|quality|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from ragexp.chunking import make_chunker  # noqa: E402
from ragexp.data.datasets import demo_paths  # noqa: E402
from ragexp.data.loaders.corpus import load_corpus  # noqa: E402
from ragexp.models.encoders import OnnxEncoder, SentenceTransformerEncoder, make_encoder  # noqa: E402
from ragexp.runtime.threads import owned_cores  # noqa: E402

LAYERS, HIDDEN, INTERMEDIATE = 6, 384, 1536
MAX_TOKENS = 256


def sgemm_flops(size: int = 1024) -> float:
    a, b = (np.random.default_rng(i).standard_normal((size, size), dtype=np.float32) for i in range(2))
    best = min(_timed(lambda: a @ b) for _ in range(3))
    return 2 * size**3 / best


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def useful_flops(token_counts: np.ndarray) -> float:
    n = token_counts.astype(np.float64)
    return float(np.sum(LAYERS * (2 * n * (4 * HIDDEN**2 + 2 * HIDDEN * INTERMEDIATE) + 4 * n**2 * HIDDEN)))


def paths() -> dict[str, tuple[object, int | None]]:
    """label -> (encoder, torch threads to set before it runs, or None for ONNX)."""
    base = {"max_seq_length": MAX_TOKENS, "batch_size": 64}
    fp32, int8 = make_encoder("minilm", **base), make_encoder("minilm", precision="int8", **base)
    assert isinstance(fp32, OnnxEncoder), "the ONNX export of minilm was refused"
    unsorted = {"sort_by_length": False}
    return {
        "torch fp32, 2 threads": (SentenceTransformerEncoder("minilm", threads=2, **base), 2),
        "torch fp32, 1 thread": (SentenceTransformerEncoder("minilm", threads=1, **base), 1),
        "onnx fp32, sorted": (fp32, None),
        "onnx fp32, input order": (OnnxEncoder("minilm", graph=fp32.graph, tokenizer=fp32.tokenizer_path, **unsorted, **base), None),
        "onnx int8, sorted": (int8, None),
        "onnx int8, input order": (OnnxEncoder("minilm", graph=int8.graph, tokenizer=int8.tokenizer_path, precision="int8", **unsorted, **base), None),
    }


def speed(rounds: int, every: int) -> None:
    import torch

    from ragexp.runtime import progress

    progress.set_enabled(False)
    corpus = load_corpus(demo_paths()[0])
    chunks = make_chunker({"name": "recursive", "size": 512, "overlap": 64}).chunk_corpus(corpus)
    texts = [c.text_with_title() for c in chunks[::every]]
    encoders = paths()
    reference = encoders["onnx fp32, sorted"][0]
    reference.encode_passages(texts[:2])  # loads the tokenizer
    reference._tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokens = np.array([len(e.ids) for e in reference._tokenizer.encode_batch(texts)])
    flops = useful_flops(tokens)
    print(f"{len(texts)} demo chunks, {tokens.sum()} tokens (mean {tokens.mean():.0f}, max {tokens.max()}), "
          f"{flops / 1e9:.1f} useful GFLOP per pass; owned cores {owned_cores()}, ONNX threads auto\n")
    for encoder, threads in encoders.values():  # warm-up: load models, sessions, first-call allocations
        if threads:
            torch.set_num_threads(threads)
        encoder.encode_passages(texts[:64])
    seconds: dict[str, list[float]] = {label: [] for label in encoders}
    machine, loads = [], []
    labels = list(encoders)
    for round_ in range(rounds):
        machine.append(sgemm_flops())
        loads.append(os.getloadavg()[0])
        for label in labels[round_ % len(labels):] + labels[: round_ % len(labels)]:
            encoder, threads = encoders[label]
            if threads:
                torch.set_num_threads(threads)
            seconds[label].append(_timed(lambda: encoder.encode_passages(texts)))
        times = ", ".join(f"{label} {seconds[label][-1]:.1f} s" for label in labels)
        print(f"round {round_ + 1}/{rounds}: sgemm {machine[-1] / 1e9:.1f} GFLOP/s, load {loads[-1]:.2f}: {times}", flush=True)
    rate = statistics.median(machine)
    base = statistics.median(seconds[labels[0]])
    print(f"\nsgemm (numpy float32 1024^2, median of rounds): {rate / 1e9:.1f} GFLOP/s; load average {min(loads):.2f}-{max(loads):.2f}\n")
    header = f"{'path':26s} {'s (median)':>10s} {'passages/s':>11s} {'tokens/s':>9s} {'vs torch 2t':>11s} {'of sgemm':>9s}"
    print(header + "\n" + "-" * len(header))
    for label in labels:
        median = statistics.median(seconds[label])
        print(f"{label:26s} {median:10.2f} {len(texts) / median:11.1f} {tokens.sum() / median:9.0f} {base / median:10.2f}x "
              f"{flops / median / rate:8.1%}")


QUALITY_PATHS = {"torch fp32": {"backend": "torch"}, "onnx fp32": {}, "onnx int8": {"precision": "int8"}}


def quality(labels: list[str], scifact: bool = True) -> None:
    """nDCG@10 on SciFact (whole documents, 300 test queries) and the demo's hit rate@5
    (recursive-512, dense) for the encoders named in ``labels`` (:data:`QUALITY_PATHS`), each
    encoded afresh."""
    from benchmarks import shared_data_dir
    from ragexp.chunking.whole import WholeDocumentChunker
    from ragexp.config.compose import compose_config
    from ragexp.data.loaders.beir import load_beir
    from ragexp.evaluation.job_spec import job_spec
    from ragexp.evaluation.pipeline import build_pipeline
    from ragexp.evaluation.prepared import prepare_data
    from ragexp.evaluation.runner import execute
    from ragexp.datamodel import Qrels
    from ragexp.metrics.evaluate import evaluate_run
    from ragexp.metrics.ranking import document_id
    from ragexp.runtime.stage_cache import StageCache
    from reference_pipelines.dense import DenseRetriever

    settings = {label: QUALITY_PATHS[label] for label in labels}
    corpus, evalset = load_beir(shared_data_dir() / "scifact", split="test")
    chunks = WholeDocumentChunker().chunk_corpus(corpus)
    queries = [item.query for item in evalset.items]
    qrels = Qrels({item.id: {e.doc_id: e.grade for e in item.evidence} for item in evalset.items})
    header = f"{'encoder':12s} {'SciFact nDCG@10':>16s} {'demo hit rate@5':>16s}"
    rows = []
    for label, options in settings.items():
        ndcg = float("nan")
        if scifact:
            retriever = DenseRetriever(encoder={"model": "minilm", **options})
            retriever.index(chunks)
            rankings = retriever.search(queries, 10)
            run = {item.id: [(document_id(cid), score) for cid, score in ranking] for item, ranking in zip(evalset.items, rankings)}
            ndcg = evaluate_run(run, qrels, ks=[10]).aggregate["ndcg_at_10"]
        overrides = ["chunking=recursive", "retrieval=dense", "generator=none", "progress=false",
                     *[f"embedding.{key}={value}" for key, value in options.items()]]
        with tempfile.TemporaryDirectory() as scratch:
            spec = job_spec(compose_config([*overrides, f"cache_dir={scratch}"]))
            cache = StageCache(scratch)
            data = prepare_data(spec, cache, progress=False)
            output = execute(spec, cache=cache, data=data, pipeline=build_pipeline(spec, cache), run_name=label)
        rows.append((label, ndcg, output.results.aggregates["hit_rate_at_5"]))
        print(f"{label}: SciFact nDCG@10 {ndcg:.5f}, demo hit rate@5 {rows[-1][2]:.3f}", flush=True)
    print("\n" + header + "\n" + "-" * len(header))
    for label, ndcg, hit in rows:
        print(f"{label:12s} {ndcg:16.5f} {hit:16.3f}")
    print("published: all-MiniLM-L6-v2 SciFact nDCG@10 0.64508 (MTEB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every", type=int, default=1, help="time every n-th demo chunk only (a shorter run on a loaded machine)")
    parser.add_argument("--part", choices=("speed", "quality", "both"), default="speed",
                        help="quality: SciFact nDCG@10 and the demo hit rate@5 per backend and precision (minutes)")
    parser.add_argument("--quality-paths", default=",".join(QUALITY_PATHS),
                        help=f"comma-separated, of: {', '.join(QUALITY_PATHS)} (torch fp32 on SciFact takes longest)")
    parser.add_argument("--demo-only", action="store_true", help="quality: the demo's hit rate@5 only (SciFact takes ~1 h loaded)")
    args = parser.parse_args()
    if args.part in ("speed", "both"):
        speed(args.rounds, args.every)
    if args.part in ("quality", "both"):
        quality(args.quality_paths.split(","), scifact=not args.demo_only)


if __name__ == "__main__":
    main()
