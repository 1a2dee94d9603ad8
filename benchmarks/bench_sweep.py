"""A 24-config sweep on the demo dataset vs the work no sweep can avoid, measured in one run.

Unavoidable work = one corpus embedding per distinct (chunking x model): every chunking's
chunks encoded once by the first-stage model (all-MiniLM-L6-v2) and once by the reranker's
model (paraphrase-MiniLM-L3 ONNX), timed here in-process on a cold model. The sweep is
3 chunkings x 2 retrievals (dense, hybrid_rrf) x 2 rerankers (none, embedding) x 2 k-lists,
run through the real CLI (``ragexp run -m``) with a fresh stage cache and a fresh sqlite store.
Target: sweep wall time <= 1.2 x unavoidable work.

    python -m benchmarks.bench_sweep [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragexp.chunking import make_chunker
from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from reference_pipelines.encoders import build_encoder

CHUNKINGS = {
    "fixed": {"name": "fixed", "unit": "chars", "size": 512, "overlap": 64},
    "recursive": {"name": "recursive", "size": 512, "overlap": 64},
    "markdown": {"name": "markdown", "max_size": 1024},
}
MODELS = {
    "minilm": {"model": "minilm", "max_seq_length": 256, "batch_size": 64},
    "paraphrase-minilm-l3": {"model": "paraphrase-minilm-l3", "max_seq_length": 128, "batch_size": 64},
}


def unavoidable_seconds() -> tuple[float, list[tuple[str, str, int, float]]]:
    corpus = load_corpus(demo_paths()[0])
    rows = []
    for model_name, spec in MODELS.items():
        encoder = build_encoder(spec)
        encoder.encode_passages(["warm-up"])  # model load is not embedding work
        for chunking_name, chunking in CHUNKINGS.items():
            chunks = make_chunker(chunking).chunk_corpus(corpus)
            started = time.perf_counter()
            encoder.encode_passages([c.text_with_title() for c in chunks])
            rows.append((chunking_name, model_name, len(chunks), time.perf_counter() - started))
    return sum(r[3] for r in rows), rows


def sweep_seconds(workdir: Path) -> float:
    command = [
        sys.executable, "-m", "ragexp.cli", "run", "-m",
        "chunking=fixed,recursive,markdown", "retrieval=dense,hybrid_rrf", "reranker=none,embedding",
        "eval.ks=[1,3,5,10],[5,10,20]", "progress=false", f"cache_dir={workdir}/cache",
        f"tracking.uri=sqlite:///{workdir}/mlflow.db", "tracking.experiment=bench-sweep",
        f"hydra.sweep.dir={workdir}/multirun",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragexp-bench-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    unavoidable, rows = unavoidable_seconds()
    print("unavoidable work: one corpus embedding per chunking x model")
    for chunking, model, n, seconds in rows:
        print(f"  {chunking:10s} {model:22s} {n:5d} chunks  {seconds:7.2f} s")
    total = sweep_seconds(workdir)
    print(f"\n24-config sweep (ragexp run -m, fresh cache and store): {total:.1f} s")
    print(f"unavoidable embedding work:                            {unavoidable:.1f} s")
    print(f"ratio sweep / unavoidable: {total / unavoidable:.2f}x (target <= 1.2x)")
    print(f"per-config overhead beyond embeddings: {(total - unavoidable) / 24:.2f} s")


if __name__ == "__main__":
    main()
