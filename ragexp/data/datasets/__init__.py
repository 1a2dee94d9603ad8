"""Data sets that ship inside the ragexp package.

The built-in demo is a help centre for the fictional "Relaywave API" (a folder of Markdown files)
plus a hand-built eval set over it; ``ragexp/data/datasets/demo/README.md`` describes how it was made.
"""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "demo"


def demo_paths() -> tuple[Path, Path]:
    """``(corpus_dir, evalset_path)`` of the built-in demo, for ``load_corpus`` / ``load_evalset``."""
    return DEMO_DIR / "corpus", DEMO_DIR / "evalset.jsonl"
