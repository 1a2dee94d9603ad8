"""Configs ``ragexp run`` is handed from elsewhere, and the trust each way in gets.

The command line is parsed first, by ragexp's own grammar (:mod:`ragexp.config.command_line`):
the flags below are read from a :class:`~ragexp.config.command_line.RunCommandLine`, never
matched in raw arguments.

- ``--config-path DIR --config-name NAME`` names **a saved config** (a run's ``resolved.yaml``,
  one handed over): data. Before Hydra starts, the file is read through the one gate
  (:func:`ragexp.config.run_config.parse_run_config`: bounded YAML, no interpolation, no ``hydra``
  node, no defaults list, a closed typed schema) and written, as plain values on ragexp's schema,
  into a fresh folder that Hydra is pointed at instead (:func:`gated_primary_config`). Nothing of
  the original file (package headers, comments, neighbouring files, resolvers) reaches Hydra.
  The stored ``tracking.uri`` and ``cache_dir`` are replaced by this machine's (a stored store URI
  would receive this machine's MLflow credentials); the command line may set them.
- ``--config-dir DIR`` adds **config groups the user chose to run**: code, as in any Hydra app
  (a group file may set Hydra's own settings, callbacks included). ragexp screens its files for
  secrets only (so none is copied into ``outputs/``, MLflow or folder names); stored data is never
  passed this way (``ragexp reproduce`` and ``ragexp upload`` read it through the gate).

:func:`local_hydra_overrides` gives a saved primary config this machine's run settings back.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from ragexp.config.command_line import RunCommandLine
from ragexp.config.compose import CONFIG_DIR
from ragexp.config.machine import default_tracking_uri, local_cache_dir
from ragexp.config.run_config import parse_run_config
from ragexp.config.secrets import expand_env, screen_config
from ragexp.errors import RagexpInputError
from ragexp.stored.limits import parse_yaml, read_text

#: The name of the gated copy of a saved primary config.
GATED_NAME = "resolved"


@contextmanager
def gated_primary_config(command: RunCommandLine) -> Iterator[RunCommandLine]:
    """``command`` with a hand-given primary config replaced by its gated copy (module docstring)
    in a temporary folder, removed on leaving (also on an interrupt); ``command`` unchanged
    without one (``--config-name`` alone picks a primary config of this machine's ``conf/``)."""
    if command.config_path is None:
        yield command
        return
    name = command.config_name or "config"
    source = command.config_path / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    cfg = parse_run_config(source)
    cfg.tracking.uri = default_tracking_uri()
    cfg.cache_dir = local_cache_dir()
    folder = Path(tempfile.mkdtemp(prefix="ragexp-saved-config-"))
    try:
        data = {"defaults": ["ragexp_schema", "_self_"], **OmegaConf.to_container(cfg)}
        (folder / f"{GATED_NAME}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        yield command.with_primary(folder, GATED_NAME)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _expanded(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(key): _expanded(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_expanded(value) for value in node]
    return expand_env(node) if isinstance(node, str) else node


def screen_config_dirs(command: RunCommandLine) -> None:
    """No file of the ``--config-dir`` folder holds a secret (after ``${oc.env:...}`` is expanded as
    Hydra would), so none reaches ``multirun.yaml``, ``.hydra/``, MLflow or folder names."""
    folder = command.config_dir
    if folder is not None and not folder.is_dir():
        raise RagexpInputError("no such folder (--config-dir names a folder of config groups)", file=folder,
                               field="--config-dir")
    if folder is not None:
        for file in sorted(folder.rglob("*.y*ml")):
            if file.suffix not in (".yaml", ".yml"):
                continue
            data = parse_yaml(read_text(file), source=file)
            try:
                screen_config(_expanded(data)) if isinstance(data, Mapping) else None
            except RagexpInputError as err:
                raise RagexpInputError(err.message, file=file, field=err.field) from None


def _all_leaves(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _all_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _all_leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, node


#: The ``hydra.*`` settings of ``conf/config.yaml`` that a run needs whatever its primary config:
#: per-run folders that cannot collide, the sweep's parent run, no change of directory.
LOCAL_HYDRA_SETTINGS = ("run", "sweep", "callbacks", "job.chdir")


def local_hydra_overrides(command: RunCommandLine) -> list[str]:
    """Overrides (``++hydra.<key>=<value>``) that set :data:`LOCAL_HYDRA_SETTINGS` to this
    machine's ``conf/config.yaml`` values when ``command`` hands Hydra another primary config
    (``--config-path``/``--config-name``), leaving out every key typed on the command line; ``[]``
    for the local primary config. Values are quoted as written there (interpolations kept)."""
    if not command.hands_primary_config:
        return []
    local = parse_yaml(read_text(CONFIG_DIR / "config.yaml"), source=CONFIG_DIR / "config.yaml")["hydra"]
    typed = {arg.split("=", 1)[0].lstrip("+~") for arg in command.overrides if "=" in arg}
    overrides = []
    for setting in LOCAL_HYDRA_SETTINGS:
        node: Any = local
        for part in setting.split("."):
            node = node[part]
        for key, value in _all_leaves(node, f"hydra.{setting}"):
            if not any(key == t or key.startswith(t + ".") for t in typed):
                text = str(value).lower() if isinstance(value, bool) else "'" + str(value).replace("'", "\\'") + "'"
                overrides.append(f"++{key}={text}")
    return overrides
