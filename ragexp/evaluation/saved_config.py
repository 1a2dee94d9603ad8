"""A run config ragexp did not compose, made a job spec: the whole gate for a stored config.

Steps 1-4 are :func:`ragexp.config.run_config.parse_run_config` (bounded YAML, a closed typed
schema, no interpolation, no secrets); then

5. this machine's settings: ``tracking.uri`` and ``cache_dir`` are the caller's (the machine's,
   :mod:`ragexp.config.machine`), never the stored ones (a stored URI would receive this machine's
   MLflow credentials, a stored path could name a file to turn into a store or a cache);
6. the one gate every job passes (:func:`~ragexp.evaluation.job_spec.job_spec`): every check a job
   makes before any work, once: values, registered component classes with constructor-checked
   parameters, the endpoints and key variables this machine names, each path field checked for
   what it may name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from ragexp.config.run_config import parse_run_config
from ragexp.evaluation.job_spec import ConfigSource, JobSpec, job_spec


def read_run_config(path: str | os.PathLike[str], *, tracking_uri: str, cache_dir: str,
                    source: ConfigSource = ConfigSource.stored_run, overrides: Sequence[str] = (),
                    allowed_endpoints: Sequence[str] = (), edit: Callable[[DictConfig], None] | None = None) -> JobSpec:
    """The whole gate (module docstring): a spec a job can be built from, or one refusal line.
    ``edit``: a change the caller makes before the checks (``ragexp reproduce`` re-scores a black-box
    system from its stored responses)."""
    cfg = parse_run_config(path)
    if edit is not None:
        edit(cfg)
    cfg.tracking.uri = tracking_uri
    cfg.cache_dir = cache_dir
    return job_spec(cfg, overrides, source=source, allowed_endpoints=allowed_endpoints)  # errors name the field
