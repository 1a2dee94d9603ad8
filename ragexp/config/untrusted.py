"""Configs not typed on this machine: what ``ragexp run`` checks before Hydra reads them.

``--config-path DIR --config-name NAME`` (a saved ``resolved.yaml``, a colleague's folder) and
``--config-dir DIR`` hand Hydra YAML files from elsewhere. Before Hydra composes or writes
anything, :func:`check_run_arguments`:

- refuses a ``hydra:`` node in any of those files unless each value it sets equals this
  machine's ``conf/config.yaml`` and refers to nothing outside Hydra's node (Hydra builds
  ``hydra.callbacks``, launchers and sweepers from it, and run/sweep dirs and the job name become
  folder names); the same for a file whose ``# @package`` header puts it into Hydra's node
  (``hydra``, ``hydra.callbacks``, ``_global_.hydra.job``); a ``defaults`` entry that picks a
  ``hydra/...`` option, puts a config into a ``hydra`` package (``evil@hydra.callbacks: x``) or
  loads one from a hidden folder, and a ``hydra/`` config folder are refused the same way;
- refuses a value that reads this machine's environment (``${oc.env:...}``) unless this
  machine's ``conf/`` has the same value at the same place (it would copy the environment into the
  run's config, params and folders), and screens every value and key of those files for secrets,
  after ``${oc.env:...}`` is expanded as Hydra would (:mod:`ragexp.config.secrets`), so nothing
  reaches ``multirun.yaml`` or ``.hydra/``;
- (:func:`local_hydra_overrides`) gives a hand-given primary config this machine's run settings
  back: Hydra takes ``hydra.*`` from the primary config, so a saved ``resolved.yaml`` (which holds
  none) would run in Hydra's own ``outputs/DATE/TIME`` (runs started in one second sharing a
  folder) without the MLflow sweep callback (a ``-m`` sweep without its parent run);
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


def hand_given_config() -> bool:
    """Whether the running Hydra job's config came from outside this machine's ``conf/``
    (``--config-path``, ``--config-dir``): then its endpoints must be named here
    (:mod:`ragexp.config.endpoints`)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    local = f"file://{CONFIG_DIR}"
    return any(source.provider in ("main", "command-line") and source.path != local and source.schema == "file"
               for source in HydraConfig.get().runtime.config_sources)


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


_PACKAGE_HEADER = re.compile(r"^\s*#\s*@package\s+(\S+)")
#: ``${key}`` / ``${key.sub}``: a reference to another config value (``${name:...}`` is a resolver).
_KEY_REFERENCE = re.compile(r"\$\{\s*([\w.\[\]-]+)\s*\}")


def _absolute(package: str) -> str:
    """A package with Hydra's ``_global_`` root spelled out of it: ``_global_.hydra.job`` -> ``hydra.job``."""
    return package.removeprefix("_global_").lstrip(".")


def is_hydra_package(package: str) -> bool:
    """Whether a package (``hydra``, ``hydra.callbacks``, ``_global_.hydra``) lands in Hydra's own node."""
    path = _absolute(package)
    return path == "hydra" or path.startswith("hydra.")


def file_package(text: str) -> str | None:
    """The ``# @package`` header of a config file (before its first non-comment line), if any."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return None
        found = _PACKAGE_HEADER.match(line)
        if found:
            return found.group(1)
    return None


def _placed(data: Mapping, package: str | None) -> Mapping:
    """``data`` as it lands in the composed config: under its ``# @package`` (root for ``_global_``
    and for a primary config; a group file without a header stays in its group, off Hydra's node)."""
    if package is None or not is_hydra_package(package):
        return data
    for key in reversed(_absolute(package).split(".")):
        data = {key: data}
    return data


def _defaults_picks(entry: Any) -> list[tuple[str, str]]:
    """``(config path, package)`` of each config a ``defaults`` entry loads: ``group@pkg: option``
    (``override``/``optional`` prefixes dropped), ``path@pkg`` for a string entry."""
    keys = [entry] if isinstance(entry, str) else [str(key) for key in entry] if isinstance(entry, Mapping) else []
    picks = []
    for key in keys:
        words = key.split()
        path, _, package = (words[-1] if words else "").partition("@")
        picks += [(path, part) for part in package.split(":")] if package else [(path, "")]
    return picks


def check_hydra_node(data: Mapping, file: Path, package: str | None = None) -> None:
    """A file's values that land in Hydra's node (its ``hydra:`` key, or all of it under a
    ``# @package hydra...`` header) must equal the local defaults and refer to no value outside
    Hydra's node (equal text then resolves equal); its ``defaults`` load no ``hydra/`` option, put
    nothing in a ``hydra`` package and load nothing from a hidden folder."""
    local = local_hydra_defaults()
    placed = _placed(data, package)
    if "hydra" in placed:
        for path, value in _leaves(placed["hydra"], "hydra"):
            references = _KEY_REFERENCE.findall(value) if isinstance(value, str) else []
            if _local_value(local, path) != value or any(not is_hydra_package(ref) for ref in references):
                raise RagexpInputError("hydra settings (callbacks, launcher, sweeper, run/sweep dirs, job name) come "
                                       "from this machine's conf/config.yaml, not from a hand-given config; remove "
                                       "it or type it on the command line", file=file,
                                       field=path if package is None else f"{path} (# @package {package})")
    for entry in data.get("defaults") or []:
        for path, target_package in _defaults_picks(entry):
            parts = [part for part in path.split("/") if part]
            if (parts and parts[0] == "hydra") or is_hydra_package(target_package):
                raise RagexpInputError("a hand-given config may not pick hydra/ options (launcher, sweeper, callbacks, "
                                       "logging) or put a config into the hydra package in its defaults; type them on "
                                       "the command line", file=file, field="defaults")
            if any(part.startswith(".") for part in parts):
                raise RagexpInputError(f"a hand-given config may not load {path!r} from a hidden folder (such as a run "
                                       "folder's .hydra/)", file=file, field="defaults")


def _expanded(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(key): _expanded(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_expanded(value) for value in node]
    return expand_env(node) if isinstance(node, str) else node


_READS_ENVIRONMENT = re.compile(r"\$\{\s*(?:oc\.env|env)\s*:")


def _local_twin(file: Path, argv: Sequence[str]) -> Any:
    """The config this machine's ``conf/`` has where a hand-given file stands: ``conf/config.yaml``
    for the primary config, ``conf/<same relative path>`` for a file of a given folder (``{}`` if none)."""
    given = hand_given(argv)
    candidates = [CONFIG_DIR / "config.yaml"] if given["path"] and file.parent == Path(given["path"][-1]) and \
        file.stem == Path((given["name"] or ["config"])[-1]).stem else []
    for folder in [Path(p) for p in given["path"][-1:] + given["dir"]]:
        if not candidates and file.is_relative_to(folder):
            candidates.append(CONFIG_DIR / file.relative_to(folder))
    try:
        return yaml.safe_load(candidates[0].read_text(encoding="utf-8")) if candidates and candidates[0].is_file() else {}
    except (OSError, yaml.YAMLError):
        return {}


def _all_leaves(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _all_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _all_leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, node


def check_environment_reads(data: Mapping, twin: Any, file: Path) -> None:
    """No value of a hand-given file reads this machine's environment (``${oc.env:...}``), which
    would copy it into the run's config, params and folders, unless this machine's own ``conf/``
    has the same value at the same place (``cache_dir``, the OpenAI ``base_url``)."""
    local = dict(_all_leaves(twin, ""))
    for path, value in _all_leaves(data, ""):
        if isinstance(value, str) and _READS_ENVIRONMENT.search(value) and local.get(path) != value:
            raise RagexpInputError("reads this machine's environment (${oc.env:...}); a hand-given config may not "
                                   "copy it into the run's logs; type it on the command line", file=file, field=path)


def check_hand_given_files(argv: Sequence[str]) -> None:
    for file in hand_given_files(argv):
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise RagexpInputError(f"cannot read this config ({str(err).splitlines()[0]})", file=file) from None
        if not isinstance(data, Mapping):
            continue
        check_hydra_node(data, file, file_package(file.read_text(encoding="utf-8")))
        check_environment_reads(data, _local_twin(file, argv), file)
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


#: The ``hydra.*`` settings of ``conf/config.yaml`` that a run needs whatever its primary config:
#: per-run folders that cannot collide, the sweep's parent run, no change of directory.
LOCAL_HYDRA_SETTINGS = ("run", "sweep", "callbacks", "job.chdir")


def local_hydra_overrides(argv: Sequence[str]) -> list[str]:
    """Overrides (``++hydra.<key>=<value>``) that set :data:`LOCAL_HYDRA_SETTINGS` to this
    machine's ``conf/config.yaml`` values when ``argv`` hands Hydra another primary config
    (``--config-path``/``--config-name``), leaving out every key typed on the command line; ``[]``
    for the local primary config. Values are quoted as written there (interpolations kept)."""
    given = hand_given(argv)
    if not (given["path"] or given["name"]):
        return []
    local = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))["hydra"]
    typed = {arg.split("=", 1)[0].lstrip("+~") for arg in argv if "=" in arg and not arg.startswith("-")}
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
