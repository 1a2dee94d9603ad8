"""A run config ragexp did not compose, made one a job can be built from: the whole gate.

Steps 1-4 are :func:`ragexp.config.run_config.parse_run_config` (bounded YAML, a closed typed
schema, no interpolation, no secrets); then

5. this machine's settings: ``tracking.uri`` and ``cache_dir`` are the caller's (the machine's,
   :mod:`ragexp.config.machine`), never the stored ones (a stored URI would receive this machine's
   MLflow credentials, a stored path could name a file to turn into a store or a cache);
6. every check a job makes before any work (:func:`~ragexp.evaluation.checks.validate_job`):
   values, registered component classes with constructor-checked parameters, the endpoints and
   key variables this machine names, and each path field checked for what it may name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from ragexp.config.run_config import parse_run_config
from ragexp.evaluation.checks import validate_job


def read_run_config(path: str | os.PathLike[str], *, tracking_uri: str, cache_dir: str,
                    allowed_endpoints: Sequence[str] = (), edit: Callable[[DictConfig], None] | None = None) -> DictConfig:
    """The whole gate (module docstring): a config a job can be built from, or one refusal line.
    ``edit``: a change the caller makes before the checks (``ragexp reproduce`` re-scores a black-box
    system from its stored responses)."""
    cfg = parse_run_config(path)
    if edit is not None:
        edit(cfg)
    cfg.tracking.uri = tracking_uri
    cfg.cache_dir = cache_dir
    validate_job(cfg, [], untrusted=True, allowed_endpoints=allowed_endpoints)  # errors name the field
    return cfg
