"""A torch encoding right after an ONNX encoding: ORT threads spinning vs blocking when idle.

A sweep runs the ONNX reranker model and the torch embedding model in one process on the same
cores. ONNX Runtime's intra-op threads spin-wait after a run by default; ragexp's sessions set
``session.intra_op.allow_spinning=0`` (:func:`ragexp.models.encoders.onnx_session_options`).
Each measurement is a fresh process that encodes 256 demo chunks with paraphrase-MiniLM-L3 (ONNX),
then times all-MiniLM-L6-v2 (torch) on the same chunks; the three settings alternate, the median
is reported.

``--under-load N`` instead times the ONNX fp32 encoder (all-MiniLM-L6-v2, SciFact's first N
abstracts, batch 16) with 1 and 2 intra-op threads, spinning and blocking, in one process, the
four settings interleaved (order reversing by round), once on the quiet machine and once while a
competitor process (``python -c 'while 1: pass'``) keeps one core busy: a setting whose threads
wait for a preempted peer collapses there.

    python -m benchmarks.bench_onnx_spinning [--repeats 3] [--under-load N]
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


def under_load(docs: int, repeats: int) -> None:
    """The ``--under-load`` measurement (module docstring)."""
    import onnxruntime

    from benchmarks import shared_data_dir
    from ragexp.data.loaders.beir import load_beir
    from ragexp.models import encoders
    from ragexp.runtime import progress

    progress.set_enabled(False)
    corpus, _ = load_beir(shared_data_dir() / "scifact", split="test")
    texts = [f"{doc.title} {doc.text}" for doc in list(corpus.values())[:docs]]
    exported = encoders.make_encoder("minilm", batch_size=16)
    paths = {}
    for threads in (1, 2):
        for spinning in ("1", "0"):
            encoder = encoders.OnnxEncoder(exported.resolved, graph=exported.graph, tokenizer=exported.tokenizer_path,
                                           max_seq_length=exported.max_seq_length, batch_size=16, threads=threads)
            encoder.encode_passages(texts[:2])  # load, then swap in a session with this spinning setting
            options = encoders.onnx_session_options(threads)
            options.add_session_config_entry(encoders.ONNX_SPINNING, spinning)
            encoder._session = onnxruntime.InferenceSession(str(exported.graph), options, providers=["CPUExecutionProvider"])
            paths[f"{threads} thread(s), {'spinning' if spinning == '1' else 'blocking'}"] = encoder
    for competing in (False, True):
        competitor = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if competing else None
        try:
            seconds: dict[str, list[float]] = {label: [] for label in paths}
            for round_ in range(repeats):
                for label in list(paths) if round_ % 2 == 0 else list(paths)[::-1]:
                    started = time.perf_counter()
                    paths[label].encode_passages(texts)
                    seconds[label].append(time.perf_counter() - started)
        finally:
            if competitor is not None:
                competitor.kill()
                competitor.wait()
        print(f"{'with' if competing else 'without'} a competitor busy on one core (load {os.getloadavg()[0]:.2f}), "
              f"{docs} SciFact abstracts, median of {repeats}:")
        for label, values in seconds.items():
            print(f"  {label:26s} {statistics.median(values):6.2f} s  {docs / statistics.median(values):6.1f} texts/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--under-load", type=int, metavar="N", help="ONNX threads and spinning under a competitor, N abstracts")
    parser.add_argument("--setting", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.under_load:
        under_load(args.under_load, args.repeats)
        return
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
