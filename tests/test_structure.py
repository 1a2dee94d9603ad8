"""ragexp's modules import one another in one direction: no import circle between modules or between
packages, and the packages keep the declared layers (``scripts/structure.py``)."""

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


def test_ragexp_packages_keep_their_layers_and_have_no_circle():
    """An import-linter-style layers contract (``structure.LAYERS``): a package imports only packages
    of lower layers, so the gate (``ragexp.stored``, ``ragexp.config``) imports nothing above it and the
    package graph has no circle. Fails before (1c332ca): 15 packages formed one circle."""
    graph = structure.import_graph()
    packages = structure.package_graph(graph)
    assert structure.circles(packages) == [], f"package circles: {structure.circles(packages)}"
    assert sorted(p for layer in structure.LAYERS for p in layer) == sorted(packages), "LAYERS names each package once"
    breaks = structure.layer_breaks(graph)
    assert breaks == [], "imports against the layers (python scripts/structure.py):\n" + "\n".join(breaks)


def test_layer_breaks_see_upward_sideways_and_unknown_imports():
    graph = {"pkg.low.a": set(), "pkg.mid.b": {"pkg.low.a"}, "pkg.mid2": {"pkg.mid.b"}, "pkg.top": {"pkg.mid.b"}}
    layers = (("pkg.low",), ("pkg.mid", "pkg.mid2"), ("pkg.top",))
    assert structure.package_graph(graph) == {"pkg.low": set(), "pkg.mid": {"pkg.low"}, "pkg.mid2": {"pkg.mid"},
                                              "pkg.top": {"pkg.mid"}}
    assert structure.layer_breaks(graph, layers) == ["pkg.mid2 -> pkg.mid.b (layer 2 -> layer 2)"]
    graph["pkg.low.a"] = {"pkg.top"}
    assert structure.layer_breaks(graph, layers)[0] == "pkg.low.a -> pkg.top (layer 1 -> layer 3)"
    assert structure.circles(structure.package_graph(graph)) == [["pkg.low", "pkg.mid", "pkg.top"]]
    assert structure.layer_breaks({"pkg.x": {"pkg.low.a"}}, layers) == ["pkg.x -> pkg.low.a (layer ? -> layer 1)"]


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
