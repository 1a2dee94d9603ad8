"""Benchmarks and held-out measurement sets. Run from the repo root, e.g.
``python -m benchmarks.bench_scifact``; each script prints the numbers the docs quote.

The public data sets are read from ``$RAGEXP_SHARED_DATA``, else ``../shared/data`` beside the
repository (:func:`shared_data_dir`); they are never copied into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Where ``scifact/``, ``squad_v1.1_dev/`` and ``reference_numbers/`` live."""
    return Path(os.environ.get("RAGEXP_SHARED_DATA", REPO.parent / "shared" / "data"))
