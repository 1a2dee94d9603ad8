"""What conversion costs in retrieval quality: the demo as Markdown, HTML, DOCX and PDF, one real
``ragexp run`` per form and pipeline, metrics side by side.

The demo corpus is rendered by the test suite's writers (:mod:`tests.helpers.demo_formats`:
markdown-it-py HTML with a site header, navigation, sidebar and footer; python-docx DOCX; fpdf2
PDF). The eval set is the demo's, less the items whose quotes do not resolve in every form (the
script names them), so every form is scored on the same items. Each run is
``ragexp run dataset=evalset chunking=<c> retrieval=<r>`` with its own output folder, store and
stage cache under a temporary folder; the table is read from each run's ``ragexp_results.json``.

    python -m benchmarks.format_metrics [--pipelines markdown:bm25 markdown:hybrid_rrf]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import read_evalset
from tests.helpers.demo_formats import FORMATS, render_corpus

FORMS = ("markdown", *FORMATS)
METRICS = ("hit_rate_at_5", "recall_at_5", "mrr", "ndcg_at_5", "doc_hit_rate_at_5")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def common_evalset(folders: dict[str, Path], target: Path) -> tuple[Path, dict[str, list[str]]]:
    """The demo eval set without the items that fail to resolve in any form; and which failed where."""
    _, evalset = demo_paths()
    failed: dict[str, list[str]] = {}
    bad_lines: set[int] = set()
    for form, folder in folders.items():
        reading = read_evalset(evalset, load_corpus(folder))
        ids = dict(zip(reading.item_lines, (item.id for item in reading.evalset.items), strict=True))
        failed[form] = [ids[p.error.line] for p in reading.problems]
        bad_lines |= {p.error.line for p in reading.problems}
    lines = evalset.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join(line for number, line in enumerate(lines, 1) if number not in bad_lines) + "\n",
                      encoding="utf-8")
    return target, failed


def run(root: Path, form: str, corpus: Path, evalset: Path, chunking: str, retrieval: str) -> dict:
    folder = root / "runs" / f"{form}-{chunking}-{retrieval}"
    args = ["run", "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", f"chunking={chunking}",
            f"retrieval={retrieval}", f"tracking.uri=sqlite:///{root / 'mlflow.db'}", "tracking.experiment=formats",
            "progress=false", f"cache_dir={root / 'cache'}", f"hydra.run.dir={folder}"]
    subprocess.run([sys.executable, "-m", "ragexp.cli", *args], check=True, env=ENV, capture_output=True, text=True)
    results = json.loads((folder / "ragexp_results.json").read_text(encoding="utf-8"))
    return results["aggregates"] | {"n_chunks": results["aggregates"]["n_chunks"], "n_queries": results["meta"]["n_queries"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", nargs="+", default=["markdown:bm25", "markdown:hybrid_rrf", "recursive:dense"],
                        help="chunking:retrieval pairs")
    args = parser.parse_args()
    corpus_dir, _ = demo_paths()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folders = {"markdown": corpus_dir, **{fmt: render_corpus(corpus_dir, root / fmt, fmt) for fmt in FORMATS}}
        evalset, failed = common_evalset(folders, root / "evalset.jsonl")
        for form, ids in failed.items():
            print(f"{form}: {len(ids)} items do not resolve{': ' + ', '.join(ids) if ids else ''}")
        print()
        header = ["pipeline", "form", "chunks", *METRICS, "Δ hit@5 vs markdown"]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for pipeline in args.pipelines:
            chunking, retrieval = pipeline.split(":")
            baseline = None
            for form in FORMS:
                started = time.perf_counter()
                agg = run(root, form, folders[form], evalset, chunking, retrieval)
                baseline = baseline or agg
                delta = agg["hit_rate_at_5"] - baseline["hit_rate_at_5"]
                cells = [f"{chunking} + {retrieval}", form, str(int(agg["n_chunks"])),
                         *(f"{agg[m]:.3f}" for m in METRICS), "—" if form == "markdown" else f"{delta:+.3f}"]
                print("| " + " | ".join(cells) + f" |  <!-- {agg['n_queries']} queries, {time.perf_counter() - started:.0f} s -->",
                      flush=True)


if __name__ == "__main__":
    main()
