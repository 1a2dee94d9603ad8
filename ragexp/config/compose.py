"""The config tree composed outside ``ragexp run``: commands, benchmarks and tests build components
from the same ``conf/`` groups a run uses, never from a second copy of a default.

Hydra keeps one global instance per process (``GlobalHydra``): two threads composing at once make
the second fail with "GlobalHydra is already initialized" (a page's warm-up thread and its request
threads both compose). :func:`compose_config` therefore composes under one process-wide lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from ragexp.config.schema import register_schema

CONFIG_DIR = Path(__file__).resolve().parents[2] / "conf"
#: Held while Hydra's global state is initialised (one composition at a time per process).
COMPOSE_LOCK = threading.Lock()


def compose_config(overrides: Sequence[str] = (), *, return_hydra_config: bool = False) -> DictConfig:
    """``conf/config.yaml`` with ``overrides`` (Hydra override syntax) applied, on the structured
    schema; thread-safe (:data:`COMPOSE_LOCK`)."""
    from hydra import compose, initialize_config_dir

    with COMPOSE_LOCK:
        register_schema()
        with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
            return compose("config", overrides=list(overrides), return_hydra_config=return_hydra_config)
