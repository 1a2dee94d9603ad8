"""``ragexp`` never imports ``reference_pipelines`` by name: the runner builds whatever ``_target_``
the config names, so a user's own pipeline plugs in exactly like the shipped ones (DESIGN.md)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import ragexp

PACKAGE_DIR = Path(ragexp.__file__).resolve().parent
FORBIDDEN = "reference_pipelines"


def _imports_of(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement and every literal ``import_module``/``__import__`` call."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def test_no_module_of_ragexp_imports_reference_pipelines_by_name() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {module}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        for line, module in _imports_of(ast.parse(path.read_text(encoding="utf-8")))
        if module == FORBIDDEN or module.startswith(FORBIDDEN + ".")
    ]
    assert offenders == [], "ragexp imports reference_pipelines by name:\n" + "\n".join(offenders)


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "import reference_pipelines.bm25\nfrom reference_pipelines.encoders import unit_rows\n"
        "def f():\n    from reference_pipelines import dense\n    importlib.import_module('reference_pipelines.hybrid')\n"
    )
    assert [module for _, module in _imports_of(ast.parse(source))] == [
        "reference_pipelines.bm25", "reference_pipelines.encoders", "reference_pipelines", "reference_pipelines.hybrid",
    ]


def test_importing_every_ragexp_module_loads_no_reference_pipeline() -> None:
    """The same at run time: every module of the package imported in a fresh process."""
    modules = [info.name for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="ragexp.")]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m == {FORBIDDEN!r} or m.startswith({FORBIDDEN + '.'!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
