"""The gate for a run config ragexp did not compose: read as data, never composed.

A run's saved ``resolved.yaml`` (``ragexp reproduce`` and ``evalset annotate --from-run`` fetch it
from a store, ``ragexp upload`` reads it from a run folder, ``ragexp run --config-path`` from a
folder handed over: :mod:`ragexp.config.untrusted`) and its ``overrides.yaml`` come from
whoever could write to that store or folder. They never reach Hydra (no defaults list, package
header, resolver or ``hydra:`` node can act), and pass, in this order:

1. bytes: a regular file of at most :data:`MAX_CONFIG_BYTES` (:func:`~ragexp.stored.limits.read_text`);
2. bounded YAML: no aliases, at most :data:`MAX_CONFIG_DEPTH` levels and :data:`MAX_CONFIG_NODES`
   nodes, no key twice, YAML's closed types (:func:`~ragexp.stored.limits.parse_yaml`);
3. a closed typed schema: the top-level keys of :class:`~ragexp.config.schema.RagexpConfig` only
   (no ``hydra`` node, no ``defaults`` list);
4. no interpolation at all: a saved config is fully resolved, so ``${`` in any key or value was
   put there by hand (it could read this machine's environment or other values) and is refused;
   then the typed nodes (``chunking``, ``eval``, ``tracking``) merged on the structured
   schema, so an unknown key or a wrong type is refused naming the key path; secrets refused
   (:func:`~ragexp.config.secrets.screen_config`); targets saved by earlier releases renamed
   (:data:`~ragexp.config.targets.RENAMED`, said on stderr).

Then :func:`ragexp.evaluation.saved_config.read_run_config` gives it this machine's settings and
every check a job makes before any work (steps 5-6 there).

:func:`read_overrides`: ``overrides.yaml`` is a list of strings (what the job was started with,
logged as a tag), through steps 1, 2 and 4.
"""

from __future__ import annotations

import os
import sys
from dataclasses import fields
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ragexp.config.schema import RagexpConfig
from ragexp.config.secrets import screen_config
from ragexp.config.targets import rename_saved_targets
from ragexp.errors import RagexpInputError
from ragexp.stored.limits import parse_yaml, read_text

MAX_CONFIG_BYTES = 1024 * 1024
MAX_CONFIG_DEPTH = 32
#: YAML nodes of a saved config (a resolved config has a few hundred).
MAX_CONFIG_NODES = 20_000
INTERPOLATION = "${"


def _parsed(path: str | os.PathLike[str]) -> Any:
    """Steps 1-2: the file's YAML value."""
    return parse_yaml(read_text(path, max_bytes=MAX_CONFIG_BYTES), source=path, max_depth=MAX_CONFIG_DEPTH,
                      max_nodes=MAX_CONFIG_NODES)


def _refuse_interpolation(data: Any, path: str | os.PathLike[str]) -> None:
    """Step 3: no ``${`` in any key or string value."""
    for field, text in _strings(data, ""):
        if INTERPOLATION in text:
            raise RagexpInputError("a saved config holds no interpolation (${...}: it could read this machine's "
                                   "environment or other values); this file was edited, refusing it",
                                   file=path, field=field or "(top level)")


def _strings(node: Any, prefix: str) -> list[tuple[str, str]]:
    """``(field, text)`` of every string key and string value below ``node``."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            field = f"{prefix}.{key}" if prefix else str(key)
            found += [(field, key)] if isinstance(key, str) else []
            found += _strings(value, field)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _strings(value, f"{prefix}[{i}]")
    elif isinstance(node, str):
        found.append((prefix, node))
    return found


def _first_leaf(node: Any, prefix: str) -> str:
    while isinstance(node, dict) and node:
        key, node = next(iter(node.items()))
        prefix = f"{prefix}.{key}"
    return prefix


def parse_run_config(path: str | os.PathLike[str]) -> DictConfig:
    """Steps 1-4 of the module docstring: the saved config on the structured schema."""
    data = _parsed(path)
    if not isinstance(data, dict):
        raise RagexpInputError("a saved config is a mapping of config groups (resolved.yaml)", file=path)
    known = {f.name for f in fields(RagexpConfig)}
    for key in data:
        if key == "hydra":
            raise RagexpInputError("a saved config holds no hydra settings (callbacks, launcher, sweeper, run/sweep dirs, "
                                   "job name come from this machine); this file was edited, refusing it", file=path,
                                   field=_first_leaf(data["hydra"], "hydra"))
        if key == "defaults":
            raise RagexpInputError("a saved config has no defaults list: it is resolved, and config groups and hydra/ "
                                   "options come from this machine's conf/ (a folder of your own config groups is "
                                   "--config-dir)", file=path, field="defaults")
        if key not in known:
            raise RagexpInputError(f"not a ragexp config key; known: {', '.join(sorted(known))}", file=path, field=str(key))
    _refuse_interpolation(data, path)
    for renamed in rename_saved_targets(data):
        print(f"note: {path}: {renamed} (a run saved by an earlier release)", file=sys.stderr)
    try:
        screen_config(data)
        return OmegaConf.merge(OmegaConf.structured(RagexpConfig), data)
    except RagexpInputError as err:
        raise RagexpInputError(err.message, file=path, field=err.field) from None
    except OmegaConfBaseException as err:
        from ragexp.config.hydra_errors import config_error_line

        raise RagexpInputError(config_error_line(err), file=path) from None


def read_overrides(path: str | os.PathLike[str]) -> list[str]:
    """A run's saved ``overrides.yaml``: a list of strings (steps 1-3)."""
    data = _parsed(path)
    _refuse_interpolation(data, path)
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise RagexpInputError("overrides.yaml is a list of strings (the job's overrides)", file=path)
    return data

