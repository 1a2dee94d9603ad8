"""Issue #48's headline, re-done: what a run reports when its gold documents changed under it.

The demo dataset's first ``--items`` items (quote form) are marked on the shipped corpus; the same
gold is written three ways: quotes (the truth: located anew at load time), bare offsets (what
``ragexp evalset resolve`` wrote before it kept quotes) and span + quote (what it writes now). Then
one paragraph (``--paragraph short``: 80 characters, ``long``: 500) is inserted after the first
paragraph of every document that holds gold, and each form is run with ``retrieval=bm25``
(default chunking, no MLflow). Last, the bare offsets go through ``ragexp evalset reanchor
--old-corpus`` and are run again. Printed: hit rate@5 of each and what the run said of its gold.

    python -m benchmarks.demo_stale_gold [--items 30] [--paragraph short|long]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir

from ragexp.cli import main as cli
from ragexp.config.compose import CONFIG_DIR
from ragexp.config.schema import register_schema
from ragexp.data.datasets import __file__ as datasets_init
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import evalset_to_jsonl, load_evalset
from ragexp.errors import RagexpInputError
from ragexp.evaluation.job_spec import job_spec
from ragexp.jobs.job import run_job

DEMO = Path(datasets_init).parent / "demo"
PARAGRAPHS = {
    "short": "This page was reorganised in the latest release; see the changelog for details.\n\n",
    "long": "Note: this page was reorganised in the latest documentation release. Sections were merged and renamed, "
            "examples were updated for the current SDK versions, and older answers moved to the changelog. If a link "
            "you saved no longer points at the right place, search for the section title; every heading kept its "
            "wording. For questions about this change, contact support through the dashboard, where the team answers "
            "within one business day.\n\n",
}


def run(root: Path, corpus: Path, evalset: Path) -> str:
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}",
                                           "retrieval=bm25", f"cache_dir={root / 'cache'}", "progress=false", "eval.ks=[5]"])
    try:
        results = run_job(job_spec(cfg), output_dir=root / "out" / evalset.stem, log_to=None).output.results
    except RagexpInputError as err:
        return f"refused: {err.render()[:300]}"
    said = [w.split(":")[0] + ":" + w.split(":")[1].split(" no longer")[0].split(" keep")[0]
            for w in results.meta["warnings"] if w.startswith("gold")]
    return f"hit@5 {results.aggregates['hit_rate_at_5']:.3f}  {'; '.join(said) or 'nothing said of its gold'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--paragraph", choices=sorted(PARAGRAPHS), default="short")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    register_schema()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        old, new = root / "old", root / "new"
        shutil.copytree(DEMO / "corpus", old)
        quoted = root / "quoted.jsonl"
        quoted.write_text("\n".join((DEMO / "evalset.jsonl").read_text(encoding="utf-8").splitlines()[:args.items + 1]) + "\n",
                          encoding="utf-8")
        old_corpus = load_corpus(old)
        loaded = load_evalset(quoted, old_corpus)
        bare = root / "bare.jsonl"
        bare.write_text("".join(json.dumps({"id": i.id, "query": i.query, "evidence": [
            {"doc_id": e.doc_id, "start": e.start, "end": e.end} if e.is_span else {"doc_id": e.doc_id}
            for e in i.evidence]}) + "\n" for i in loaded), encoding="utf-8")
        resolved = root / "resolved.jsonl"
        resolved.write_text(evalset_to_jsonl(loaded, old_corpus), encoding="utf-8")
        shutil.copytree(old, new)
        gold_docs = {e.doc_id for item in loaded for e in item.evidence}
        for path in new.rglob("*"):
            if path.is_file() and path.relative_to(new).with_suffix("").as_posix() in gold_docs:
                text = path.read_text(encoding="utf-8")
                cut = text.index("\n\n") + 2 if "\n\n" in text else 0
                path.write_text(text[:cut] + PARAGRAPHS[args.paragraph] + text[cut:], encoding="utf-8")
        n_spans = sum(e.is_span for item in loaded for e in item.evidence)
        print(f"{len(loaded)} items, {n_spans} spans in {len(gold_docs)} documents, each given a {args.paragraph} paragraph")
        for name, path in [("quotes (the truth)", quoted), ("bare offsets", bare), ("span + quote", resolved)]:
            print(f"{name:32s} {run(root, new, path)}")
        moved = root / "bare.v2.jsonl"
        code = cli(["evalset", "reanchor", str(bare), "--corpus", str(new), "--old-corpus", str(old), "--output", str(moved)])
        print(f"{'bare after reanchor --old-corpus':32s} {run(root, new, moved)}  (reanchor exit {code})")


if __name__ == "__main__":
    main()
