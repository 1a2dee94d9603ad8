"""A composed run config on the tiny dataset, without the CLI."""

from __future__ import annotations

from pathlib import Path

from ragexp.config.compose import compose_config


def compose_run_config(tiny_dataset, cache_dir: Path, *overrides: str):
    corpus, evalset = tiny_dataset
    return compose_config([
        "dataset=evalset", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}", "retrieval=bm25",
        "chunking=fixed", "chunking.size=120", "chunking.overlap=20", f"cache_dir={cache_dir}", "progress=false",
        *overrides,
    ])  # fmt: skip
