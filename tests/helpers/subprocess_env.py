"""Instrumenting a real ``ragexp`` subprocess."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def env_with_sitecustomize(env: Mapping[str, str], folder: Path, source: str) -> dict[str, str]:
    """``env`` for a subprocess that runs ``source`` as its ``sitecustomize`` at start-up (written
    to ``folder``, put first on ``PYTHONPATH``): how a test instruments a real ``ragexp`` process."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(source, encoding="utf-8")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))}
