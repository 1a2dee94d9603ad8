"""``ragexp run``'s command line: ragexp's own exact grammar, and the argv it builds for Hydra.

Hydra reads its flags with argparse, which takes any unambiguous prefix of a flag (``--config-pa``
is ``--config-path``) and has flags ragexp never offers (``--experimental-rerun FILE`` unpickles a
file). So ragexp parses the command line itself, into a closed, typed :class:`RunCommandLine`,
and hands Hydra only the canonical argv that :meth:`RunCommandLine.hydra_argv` builds from it
(every flag spelled whole, ``--flag=value``, paths absolute, then the overrides). The grammar:

- ``-m``/``--multirun``; ``--cfg``/``-c`` ``job|hydra|all`` with ``--resolve``; ``--info[=WHAT]``
  (``WHAT`` one of :data:`INFO_CHOICES`); ``-h``/``--help``; ``--hydra-help``;
- ``--config-path``/``-cp DIR`` (a folder holding a saved config: data, read through the gate,
  :mod:`ragexp.config.untrusted`); ``--config-name``/``-cn NAME``: a plain file name inside
  that folder (or this machine's ``conf/``), optionally ending ``.yaml``/``.yml``: letters, digits,
  ``_``, ``-``, ``.``, never ``..``, ``/`` or an absolute path; ``--config-dir``/``-cd DIR``
  (config groups: code the user chose);
- ``--allow-endpoint URL[=VARIABLE]`` (ragexp's, repeatable: :mod:`ragexp.config.endpoints`);
- every other argument is a Hydra override (``key=value``, ``+key=value``, ``~key``): it may not
  begin with ``-``, and is parsed here by Hydra's override grammar, so a parse error of any kind
  (a number beyond Python's 4,300-digit limit raises ``ValueError`` there) is one line, before
  Hydra starts or writes anything.

A value flag takes its value as ``--flag VALUE`` (a ``VALUE`` not beginning with ``-``) or
``--flag=VALUE`` (``--info`` only the second); a flag given twice, a flag not in this list (a prefix of one, Hydra's ``--version``,
``--package``, ``--run``, ``--shell-completion``, ``--experimental-rerun``) and a short flag with
its value attached (``-cpDIR``) are refused in one line, before anything is read or written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from ragexp.errors import RagexpInputError

CFG_CHOICES = ("job", "hydra", "all")
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


@dataclass(frozen=True)
class _Flag:
    field: str
    value: bool  # takes a value
    choices: tuple[str, ...] = ()
    repeatable: bool = False
    inline_only: bool = False  # the value only as --flag=VALUE (optional value)


_MULTIRUN = _Flag("multirun", False)
_CFG = _Flag("cfg", True, CFG_CHOICES)
_HELP = _Flag("help", False)
_PATH = _Flag("config_path", True)
_NAME = _Flag("config_name", True)
_DIR = _Flag("config_dir", True)
#: Every spelling ragexp accepts, each whole (no prefix of one is another).
FLAGS: dict[str, _Flag] = {
    "-m": _MULTIRUN, "--multirun": _MULTIRUN,
    "-c": _CFG, "--cfg": _CFG,
    "--resolve": _Flag("resolve", False),
    "--info": _Flag("info", True, INFO_CHOICES, inline_only=True),
    "-h": _HELP, "--help": _HELP,
    "--hydra-help": _Flag("hydra_help", False),
    "-cp": _PATH, "--config-path": _PATH,
    "-cn": _NAME, "--config-name": _NAME,
    "-cd": _DIR, "--config-dir": _DIR,
    "--allow-endpoint": _Flag("allowed_endpoints", True, repeatable=True),
}
#: What ``--hydra-help`` shows: the flags above (``conf/hydra/hydra_help/ragexp.yaml``), not Hydra's own list.
HYDRA_HELP_OVERRIDE = "hydra/hydra_help=ragexp"
#: A config name: one plain file name (what Hydra looks up inside the chosen config folder).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_GRAMMAR = ("ragexp run takes overrides (key=value) and only these flags: -m/--multirun, --cfg job|hydra|all, "
            "--resolve, --info[=WHAT], -h/--help, --hydra-help, --config-path DIR, --config-name NAME, --config-dir DIR, "
            "--allow-endpoint URL[=VARIABLE]")


@dataclass(frozen=True)
class RunCommandLine:
    """One ``ragexp run`` command line, parsed (module docstring). Paths are absolute."""

    overrides: tuple[str, ...] = ()
    multirun: bool = False
    cfg: str | None = None
    resolve: bool = False
    info: str | None = None
    help: bool = False
    hydra_help: bool = False
    config_path: Path | None = None
    config_name: str | None = None
    config_dir: Path | None = None
    allowed_endpoints: tuple[str, ...] = ()

    @property
    def hands_primary_config(self) -> bool:
        """Whether Hydra's primary config is not this machine's ``conf/config.yaml``."""
        return self.config_path is not None or self.config_name is not None

    def with_primary(self, folder: Path, name: str) -> RunCommandLine:
        """The same command line with ``folder``/``name`` as its primary config."""
        return replace(self, config_path=folder, config_name=name)

    def hydra_argv(self) -> list[str]:
        """The canonical argv Hydra parses: every flag whole and ``--flag=value``, then the overrides
        (none begins with ``-``, so argparse reads each as one). ``--hydra-help`` shows ragexp's flags
        (:data:`HYDRA_HELP_OVERRIDE`); Hydra composes that help from ``conf/`` without a primary config,
        so a handed ``--config-path`` is left out of it."""
        if self.hydra_help:
            return ["--hydra-help", *self.overrides, HYDRA_HELP_OVERRIDE]
        argv = ["--multirun"] if self.multirun else []
        argv += [f"--cfg={self.cfg}"] if self.cfg else []
        argv += ["--resolve"] if self.resolve else []
        argv += [f"--info={self.info}"] if self.info else []
        argv += ["--help"] if self.help else []
        argv += [f"--config-path={self.config_path}"] if self.config_path is not None else []
        argv += [f"--config-name={self.config_name}"] if self.config_name is not None else []
        argv += [f"--config-dir={self.config_dir}"] if self.config_dir is not None else []
        return [*argv, *self.overrides]


def parse_run_command_line(argv: list[str] | tuple[str, ...]) -> RunCommandLine:
    """``argv`` (after ``run``) as a :class:`RunCommandLine`, or one :class:`RagexpInputError`."""
    values: dict[str, object] = {}
    overrides: list[str] = []
    allowed: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not isinstance(arg, str) or "\x00" in arg:
            raise RagexpInputError("an argument holds a NUL character", field="argv")
        if not arg.startswith("-"):
            overrides.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        flag = FLAGS.get(name)
        if flag is None:
            raise RagexpInputError(f"unknown option {_shown(name)}: {_GRAMMAR}", field="argv")
        if not flag.value and eq:
            raise RagexpInputError(f"{name} takes no value", field="argv")
        value: str | bool = True
        if flag.value:
            if eq:
                value = inline
            elif flag.inline_only:
                value = flag.choices[0]
            elif i < len(args) and not str(args[i]).startswith("-"):
                value, i = args[i], i + 1
            else:
                raise RagexpInputError(f"{name} needs a value (--flag VALUE or --flag=VALUE)", field="argv")
            if flag.choices and value not in flag.choices:
                raise RagexpInputError(f"{name} takes one of {', '.join(flag.choices)}, got {_shown(value)}", field="argv")
        if flag.repeatable:
            allowed.append(str(value))
            continue
        if flag.field in values:
            raise RagexpInputError(f"{name} is given twice; give it once", field="argv")
        values[flag.field] = value
    for override in overrides:
        _check_override(override)
    return RunCommandLine(
        overrides=tuple(overrides), multirun=bool(values.get("multirun")), cfg=values.get("cfg"),  # type: ignore[arg-type]
        resolve=bool(values.get("resolve")), info=values.get("info"), help=bool(values.get("help")),  # type: ignore[arg-type]
        hydra_help=bool(values.get("hydra_help")), config_path=_folder(values.get("config_path"), "--config-path"),
        config_name=_config_name(values.get("config_name")), config_dir=_folder(values.get("config_dir"), "--config-dir"),
        allowed_endpoints=tuple(allowed))


def _check_override(text: str) -> None:
    """``text`` parses with Hydra's override grammar, or one line saying why not."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from ragexp.config.hydra_errors import config_error_line

    try:
        OverridesParser.create().parse_overrides([text])
    except Exception as err:  # noqa: BLE001 - Hydra's parser raises its own and Python's errors alike
        line = config_error_line(err) if "OverrideParseException" in type(err).__name__ else (
            f"bad override syntax: {_shown(text)} ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''})")
        raise RagexpInputError(line, field="argv") from None


def _folder(value: object, flag: str) -> Path | None:
    if value is None:
        return None
    if not value:
        raise RagexpInputError(f"{flag} needs a folder", field=flag)
    return Path(str(value)).absolute()


def _config_name(value: object) -> str | None:
    if value is None:
        return None
    text = str(value)
    if not _PLAIN_NAME.fullmatch(text) or ".." in text:
        raise RagexpInputError(f"must be a plain config name inside the chosen folder (letters, digits, _ - .; no '..', "
                               f"'/' or absolute path), got {_shown(text)}: the folder is --config-path", field="--config-name")
    return text


def _shown(text: object) -> str:
    shown = repr(str(text))
    return shown if len(shown) <= 80 else shown[:77] + "..."
