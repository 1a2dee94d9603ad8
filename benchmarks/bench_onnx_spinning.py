"""A torch encoding right after an ONNX encoding: ORT threads spinning vs blocking when idle.

A sweep runs the ONNX reranker model and the torch embedding model in one process on the same
cores. ONNX Runtime's intra-op threads spin-wait after a run by default; ragexp's sessions set
``session.intra_op.allow_spinning=0`` (:func:`ragexp.models.encoders.onnx_session_options`).
Each measurement is a fresh process that encodes 256 demo chunks with paraphrase-MiniLM-L3 (ONNX),
then times all-MiniLM-L6-v2 (torch) on the same chunks; the three settings alternate, the median
is reported.

    python -m benchmarks.bench_onnx_spinning [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = ("no ONNX run before", "ORT spinning (ORT default)", "ORT blocking (ragexp)")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def measure(setting: str) -> dict[str, float]:
    """In this process: the ONNX encoding (unless ``setting`` is the first) and the torch one after it."""
    from ragexp.chunking import make_chunker
    from ragexp.data.datasets import demo_paths
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.models import encoders

    if setting == SETTINGS[1]:
        def spinning_session(path: str, threads: int | None):
            import onnxruntime

            options = encoders.onnx_session_options(threads)
            options.add_session_config_entry(encoders.ONNX_SPINNING, "1")  # ORT's default, overwritten back
            return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        encoders._load_onnx_session = spinning_session
    corpus = load_corpus(demo_paths()[0])
    texts = [c.text_with_title() for c in make_chunker({"name": "recursive", "size": 512, "overlap": 64}).chunk_corpus(corpus)][:256]
    torch_encoder = encoders.build_encoder({"model": "minilm", "backend": "torch", "max_seq_length": 256, "batch_size": 64})
    torch_encoder.encode_queries(["load the model"])
    row = {}
    if setting != SETTINGS[0]:
        onnx_encoder = encoders.build_encoder({"model": "paraphrase-minilm-l3", "max_seq_length": 128, "batch_size": 64})
        started = time.perf_counter()
        onnx_encoder.encode_passages(texts)
        row["onnx_s"] = time.perf_counter() - started
    started = time.perf_counter()
    torch_encoder.encode_passages(texts)
    row["torch_s"] = time.perf_counter() - started
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--setting", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setting:
        print(json.dumps(measure(args.setting)))
        return
    rows: dict[str, list[dict[str, float]]] = {setting: [] for setting in SETTINGS}
    for _ in range(args.repeats):
        for setting in SETTINGS:
            done = subprocess.run([sys.executable, "-m", "benchmarks.bench_onnx_spinning", "--setting", setting],
                                  env=ENV, check=True, capture_output=True, text=True)
            rows[setting].append(json.loads(done.stdout.strip().splitlines()[-1]))
    baseline = statistics.median(r["torch_s"] for r in rows[SETTINGS[0]])
    print(f"torch encoding of 256 demo chunks, median of {args.repeats} fresh processes per setting:")
    for setting in SETTINGS:
        torch_s = statistics.median(r["torch_s"] for r in rows[setting])
        onnx = [r["onnx_s"] for r in rows[setting] if "onnx_s" in r]
        onnx_text = f"   (ONNX encoding before it {statistics.median(onnx):.2f} s)" if onnx else ""
        print(f"  {setting:28s} {torch_s:6.2f} s  {torch_s / baseline:5.2f}x{onnx_text}")


if __name__ == "__main__":
    main()
