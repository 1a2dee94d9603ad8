"""Every way in reads stored data through the gate (issue #30): derived from the CLI registry, so a
new command cannot skip it.

The commands are enumerated from :data:`ragexp.cli.COMMANDS` (and ``run``), their sub-commands
from the parser the CLI builds. Each command's code (its module and the ``ragexp.commands._*``
helpers it imports, or the Hydra app for ``run``) may not read or parse a file itself: no
``open``, ``read_text``/``read_bytes``, ``json``/``yaml``/``OmegaConf`` loads, CSV readers or direct
MLflow artifact downloads. It calls readers, and every module of ``ragexp`` that reads or parses a
file imports the gate (:mod:`ragexp.stored`, e.g. ``limits``) or is named below as
reading only what this machine wrote or ships (with the reason). A module that reads a store, a
run folder, an eval set, a queue, labels or a calibration file without the gate fails here.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from ragexp import cli

RAGEXP = Path(cli.__file__).resolve().parent
#: Calls that read or parse a file: ``name`` for a plain call, ``.name`` for a method or module
#: attribute (``open`` with a literal mode that writes, appends or creates is a write, not a read).
RAW_READS = {"open", ".open", ".read_text", ".read_bytes", "json.load", "json.loads", "yaml.load", "yaml.safe_load",
             "OmegaConf.load", ".download_artifacts"}
OPENS = {"open", ".open"}
#: Modules that read files with raw calls and are not stored data (each with why).
LOCAL_ONLY = {
    "ragexp/stored/limits.py": "the gate's own primitives",
    "ragexp/runtime/stage_cache.py": "the stage cache this machine wrote (content-addressed, atomic)",
    "ragexp/runtime/text_vectors.py": "the vector store under the stage cache, written here",
    "ragexp/llm/call_cache.py": "the model-call cache under the stage cache, written here",
    "ragexp/models/onnx_export.py": "the ONNX graph exported here from a resolved model",
    "ragexp/data/convert/history.py": "the converter record under the stage cache, written here",
    "ragexp/config/endpoints.py": "this machine's conf/ (the endpoints it names)",
    "ragexp/candidates/near_duplicates.py": "the labelled pairs file shipped in ragexp's resources",
    "ragexp/commands/ui.py": "the log file of the MLflow server it started",
    "ragexp/tracking/store.py": "the sqlite header check and artifact download behind check_artifact_location",
    "ragexp/runtime/fingerprint.py": "hashes files their reader checked first (a model folder in resolve_model, "
                                     "corpus files in the loader)",
    "ragexp/runtime/atomic_file.py": "fsyncs the partial file it has just written",
    "ragexp/runtime/threads.py": "the kernel's /proc/stat CPU counters of this machine (load-aware threads: auto)",
    "ragexp/cost/memory.py": "the kernel's /proc/self/status of this process (its peak RSS)",
}
#: Raw reads still to move behind the gate: allowed until then, never added to.
PENDING_RESULTS_READER: dict[str, str] = {}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = node.value.id if isinstance(node.value, ast.Name) and node.value.id in ("json", "yaml", "csv",
                                                                                        "OmegaConf") else ""
        return f"{owner}.{node.attr}"
    return ""


def raw_reads(path: Path) -> list[str]:
    """``line: call`` of every raw read in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{node.lineno}: {_name(node.func)}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _name(node.func) in RAW_READS and not _writes(node)]


def _writes(call: ast.Call) -> bool:
    """An ``open`` whose literal mode writes (``"w"``, ``"a"``, ``"x"``, ``"rb+"``)."""
    if _name(call.func) not in OPENS:
        return False
    position = 1 if _name(call.func) == "open" else 0
    modes = [k.value for k in call.keywords if k.arg == "mode"] + call.args[position:position + 1]
    return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def module_file(name: str) -> Path | None:
    base = RAGEXP.parent / name.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def entry_points() -> dict[str, list[Path]]:
    """Each CLI command (from the registry) and its code: the command module with the private
    ``ragexp.commands._*`` helpers it reaches; ``run`` is the Hydra app and its config intake."""
    commands = {"run": [RAGEXP / "jobs" / "app.py", RAGEXP / "config" / "untrusted.py"]}
    for name in cli.COMMANDS:
        files, todo = [], [f"ragexp.commands.{name}"]
        while todo:
            file = module_file(todo.pop())
            if file is None or file in files:
                continue
            files.append(file)
            todo += [m for m in imported_modules(file) if m.startswith("ragexp.commands._")]
        commands[name] = files
    return commands


def subcommands(name: str) -> list[str]:
    parser = cli.build_parser(name)
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    command = top.choices[name]
    nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    return [f"{name} {sub}" for sub in nested[0].choices] if nested else [name]


def test_the_registry_lists_every_command_module():
    """A command module not in the registry would escape this file: every public module of
    ragexp/commands is a registered command; every sub-command is reachable from the parser."""
    modules = {p.stem for p in (RAGEXP / "commands").glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(cli.COMMANDS)
    assert {"evalset annotate", "evalset queries", "judge review", "judge calibrate"} <= {
        sub for name in cli.COMMANDS for sub in subcommands(name)}


@pytest.mark.parametrize("command", ["run", *cli.COMMANDS])
def test_a_command_reads_no_file_itself(command):
    reads = {str(f.relative_to(RAGEXP.parent)): raw_reads(f) for f in entry_points()[command]}
    unexpected = {file: lines for file, lines in reads.items()
                  if lines and file not in LOCAL_ONLY and file not in PENDING_RESULTS_READER}
    assert unexpected == {}, f"ragexp {command} reads files without the gate (use ragexp.stored readers): {unexpected}"


def test_every_module_that_reads_a_file_goes_through_the_gate():
    offenders = {}
    for file in sorted(RAGEXP.rglob("*.py")):
        relative = str(file.relative_to(RAGEXP.parent))
        if relative in LOCAL_ONLY or relative in PENDING_RESULTS_READER or not raw_reads(file):
            continue
        if not any(m == "ragexp.stored" or m.startswith("ragexp.stored.") for m in imported_modules(file)):
            offenders[relative] = raw_reads(file)
    assert offenders == {}, f"modules reading files without ragexp.stored: {offenders}"


def test_the_audit_sees_a_raw_read(tmp_path):
    """The scan is not vacuous: a command that parses a stored file itself is caught."""
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("import json\nfrom omegaconf import OmegaConf\n\ndef run(args):\n"
                      "    cfg = OmegaConf.load(args.path)\n    open(args.out, 'w').write('x')\n"
                      "    return json.loads(open(args.other).read())\n")
    assert raw_reads(sneaky) == ["5: OmegaConf.load", "7: json.loads", "7: open"]
