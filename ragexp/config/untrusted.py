"""Configs not typed on this machine: what ``ragexp run`` checks before Hydra reads them.

``--config-path DIR --config-name NAME`` (a saved ``resolved.yaml``, a colleague's folder) and
``--config-dir DIR`` hand Hydra YAML files from elsewhere. Before Hydra composes or writes
anything, :func:`check_run_arguments`:

- refuses a ``hydra:`` node in any of those files unless each value it sets equals this
  machine's ``conf/config.yaml`` (Hydra builds ``hydra.callbacks``, launchers and sweepers from it,
  and run/sweep dirs and the job name become folder names); a ``defaults`` entry that picks a
  ``hydra/...`` option and a ``hydra/`` config folder are refused the same way;
- screens every value and key of those files for secrets, after ``${oc.env:...}`` is expanded as
  Hydra would (:mod:`ragexp.config.secrets`), so nothing reaches ``multirun.yaml`` or ``.hydra/``;
- refuses a ``_target_`` given on the command line (``hydra.callbacks.x._target_=...``,
  ``+hydra.callbacks.x={_target_: ...}``) that is not a registered component class, and Hydra's
  call keys (``_partial_``, ``_args_``) anywhere on it (:mod:`ragexp.config.targets`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ragexp.config.compose import CONFIG_DIR
from ragexp.config.secrets import expand_env, screen_config
from ragexp.config.targets import CALL_KEYS, component_class
from ragexp.errors import RagexpInputError

_OPTIONS = {"--config-path": "path", "-cp": "path", "--config-name": "name", "-cn": "name", "--config-dir": "dir",
            "-cd": "dir"}
_TARGET_IN_VALUE = re.compile(r"""['"]?_target_['"]?\s*:\s*['"]?([^'",}\s]+)""")


def hand_given(argv: Sequence[str]) -> dict[str, list[str]]:
    """The values of ``--config-path``/``--config-name``/``--config-dir`` (and short forms) in ``argv``."""
    found: dict[str, list[str]] = {"path": [], "name": [], "dir": []}
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in _OPTIONS:
            found[_OPTIONS[flag]].append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
    return found


def hand_given_files(argv: Sequence[str]) -> list[Path]:
    """The YAML files a hand-given config path or dir offers Hydra (hidden folders such as a run
    folder's ``.hydra/`` left out: Hydra's records, not configs)."""
    given = hand_given(argv)
    files: list[Path] = []
    if given["path"]:
        folder = Path(given["path"][-1])
        name = (given["name"] or ["config"])[-1]
        primary = folder / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
        files += [primary] if primary.is_file() else []
    for folder in [Path(p) for p in given["path"][-1:] + given["dir"]]:
        if (folder / "hydra").is_dir():
            raise RagexpInputError("a hand-given config folder may not hold hydra/ configs (launchers, sweepers, "
                                   "callbacks come from this machine)", file=folder / "hydra")
        files += [f for f in sorted(folder.rglob("*.y*ml")) if f.suffix in (".yaml", ".yml") and not any(
            part.startswith(".") for part in f.relative_to(folder).parts) and f not in files]
    return files


def local_hydra_defaults() -> dict:
    """The ``hydra:`` node of this machine's ``conf/config.yaml``, as written (interpolations unresolved)."""
    return yaml.safe_load((CONFIG_DIR / "config.yaml").read_text(encoding="utf-8")).get("hydra", {})


def _leaves(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}")
    else:
        yield prefix, node


_MISSING = object()  # a key the local defaults do not have: never equal to a given value


def _local_value(local: Any, path: str) -> Any:
    node = local
    for key in path.split(".")[1:]:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def check_hydra_node(data: Mapping, file: Path) -> None:
    """A file's ``hydra:`` values must equal the local defaults; its ``defaults`` pick no ``hydra/`` option."""
    local = {"hydra": local_hydra_defaults()}
    if "hydra" in data:
        for path, value in _leaves(data["hydra"], "hydra"):
            if _local_value(local, path) != value:
                raise RagexpInputError("hydra settings (callbacks, launcher, sweeper, run/sweep dirs, job name) come "
                                       "from this machine's conf/config.yaml, not from a hand-given config; remove "
                                       "it or type it on the command line", file=file, field=path)
    for entry in data.get("defaults") or []:
        text = yaml.safe_dump(entry) if not isinstance(entry, str) else entry
        if re.search(r"(^|[\s/])hydra(/|\b)", text):
            raise RagexpInputError("a hand-given config may not pick hydra/ options (launcher, sweeper, callbacks, "
                                   "logging) in its defaults; type them on the command line", file=file, field="defaults")


def _expanded(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(key): _expanded(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_expanded(value) for value in node]
    return expand_env(node) if isinstance(node, str) else node


def check_hand_given_files(argv: Sequence[str]) -> None:
    for file in hand_given_files(argv):
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise RagexpInputError(f"cannot read this config ({str(err).splitlines()[0]})", file=file) from None
        if not isinstance(data, Mapping):
            continue
        check_hydra_node(data, file)
        try:
            screen_config(_expanded(data))
        except RagexpInputError as err:
            raise RagexpInputError(err.message, file=file, field=err.field) from None


def check_command_line_targets(argv: Sequence[str]) -> None:
    """Every ``_target_`` an override names is a registered class; no call key is set."""
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        leaf = key.rsplit(".", 1)[-1]
        if leaf in CALL_KEYS or any(call in value for call in CALL_KEYS):
            raise RagexpInputError(f"{leaf if leaf in CALL_KEYS else 'a call key'} is not allowed: components are "
                                   "built from their own parameters only", field=key)
        targets = [value.strip("'\"")] if leaf == "_target_" else _TARGET_IN_VALUE.findall(value)
        for target in targets:
            for choice in target.split(",") if leaf == "_target_" else [target]:
                component_class(choice.strip(), key if leaf == "_target_" else f"{key}._target_")


def check_run_arguments(argv: Sequence[str]) -> None:
    """All of the module docstring, before Hydra starts."""
    check_command_line_targets(argv)
    check_hand_given_files(argv)
