"""The config tree composed outside ``ragexp run``: commands, benchmarks and tests build components
from the same ``conf/`` groups a run uses, never from a second copy of a default."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from ragexp.config.schema import register_schema

CONFIG_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: Sequence[str] = (), *, return_hydra_config: bool = False) -> DictConfig:
    """``conf/config.yaml`` with ``overrides`` (Hydra override syntax) applied, on the structured schema."""
    from hydra import compose, initialize_config_dir

    register_schema()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=return_hydra_config)
