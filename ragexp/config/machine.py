"""This machine's run settings, as ``conf/`` sets them: its MLflow store and its stage cache.

A config ragexp did not compose (a stored or hand-given ``resolved.yaml``) never chooses these: a
stored store URI would receive this machine's MLflow credentials, a stored path could name a file
to turn into a store or a cache; :mod:`ragexp.config.run_config` and :mod:`ragexp.config.untrusted`
put this machine's values in their place.
"""

from __future__ import annotations

import os


def default_tracking_uri() -> str:
    """This machine's MLflow store, as ``conf/tracking/default.yaml`` sets it: ``$MLFLOW_TRACKING_URI``,
    else ``sqlite:///mlflow.db`` in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")


def local_cache_dir() -> str:
    """This machine's stage cache, as ``conf/config.yaml`` sets it (``$RAGEXP_CACHE_DIR``, else
    ``.ragexp_cache`` in the working directory)."""
    return os.environ.get("RAGEXP_CACHE_DIR") or os.path.join(os.getcwd(), ".ragexp_cache")
