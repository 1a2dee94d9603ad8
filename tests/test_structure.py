"""ragexp's modules import one another in one direction: no import circle (``scripts/structure.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _structure():
    spec = importlib.util.spec_from_file_location("ragexp_structure", REPO / "scripts" / "structure.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


structure = _structure()


def test_ragexp_has_no_import_circle():
    found = structure.circles(structure.import_graph())
    assert found == [], "import circles in ragexp/ (python scripts/structure.py):\n" + "\n".join(
        " -> ".join(circle) for circle in found)


def test_the_graph_sees_deferred_relative_and_from_imports(tmp_path):
    """A circle closed by an import inside a function, a relative import or ``from pkg import mod``
    is found; an import under ``if TYPE_CHECKING:`` is not an edge."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import value\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n"
                                  "def g():\n    import pkg.a\n")
    (package / "d.py").write_text("import pkg.c\n")
    graph = structure.import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert structure.circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (package / "c.py").write_text("VALUE = 1\n")
    assert structure.circles(structure.import_graph(tmp_path, "pkg")) == []


def test_where_things_live_in_docs_is_current():
    """docs/structure.md is what ``python scripts/structure.py --doc`` writes from the code now."""
    assert (REPO / "docs" / "structure.md").read_text(encoding="utf-8") == structure.where_things_live(), (
        "docs/structure.md is stale (a module added, moved or its docstring's first sentence changed): "
        "python scripts/structure.py --doc")


def test_where_things_live_lists_every_module_once_under_its_folder():
    text = structure.where_things_live()
    listed = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]
    headings = [line.split("`")[1] for line in text.splitlines() if line.startswith("## `")]
    packages = [name for name in headings if name in structure.modules()]  # ragexp/commands/ has no __init__
    assert sorted(listed + packages) == sorted(structure.modules())
    assert "| `ragexp.metrics.measure` |" in text and "Import circles between modules: none." in text
