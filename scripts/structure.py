"""ragexp's import graph, read from the source: which module imports which, and its circles.

Every ``import`` and ``from ... import`` statement of a module counts, also one inside a function
(a deferred import still makes the two modules depend on each other), except under
``if TYPE_CHECKING:``. ``from package import name`` is an edge to ``package.name`` when that is a
module, else to ``package``.

The same graph between packages (:func:`package_graph`: a module's package is the first two parts of
its name, ``ragexp.data.loaders.beir`` -> ``ragexp.data``; ``ragexp.errors`` and ``ragexp.cli`` are
packages of their own, ``ragexp.datamodel`` too) follows :data:`LAYERS`: a package imports only packages of lower layers
(:func:`layer_breaks`), so there is no circle between packages either.

    python scripts/structure.py            # the package graph, its circles and layer breaks (exit 1 when any)
    python scripts/structure.py --doc      # write docs/structure.md, "where things live", from the code

docs/structure.md lists each package of ragexp/ with the packages it imports and each module with
the first sentence of its docstring; tests/test_structure.py fails when it differs from the code.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "ragexp"
DOC = REPO / "docs" / "structure.md"
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def modules(root: Path = REPO, package: str = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of ``package`` under ``root`` (``a.b`` for ``a/b/__init__.py``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return skipped


def imported_modules(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports (module docstring)."""
    known = set(known)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = _type_checking_nodes(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in known:
                    found.add(f"{module}.{alias.name}")
                elif module in known:
                    found.add(module)
    found.discard(name)
    return found


def import_graph(root: Path = REPO, package: str = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` (module docstring)."""
    known = modules(root, package)
    return {name: imported_modules(name, path, known) for name, path in known.items()}


#: ragexp's packages, bottom layer first. A package imports only packages of the layers below its own
#: (never one beside it in its layer, never one above): the gate (``stored``, then ``config``) sits
#: under everything that reads data, the data model under the chunkers and loaders, and the commands on top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ragexp", "ragexp.errors"),  # the version; the one error type
    ("ragexp.runtime", "ragexp.text"),  # files, caches, threads, progress; tokens and BM25
    ("ragexp.stored", "ragexp.web"),  # the gate's primitives (bounded reads, canonical URLs); the pages' server
    ("ragexp.config", "ragexp.datamodel"),  # the config schema and the run-config gate; documents, chunks, evidence
    ("ragexp.chunking", "ragexp.metrics", "ragexp.models"),
    ("ragexp.data", "ragexp.llm"),
    ("ragexp.candidates", "ragexp.judging", "ragexp.systems"),
    ("ragexp.cost",),
    ("ragexp.evaluation",),
    ("ragexp.annotation", "ragexp.comparison"),
    ("ragexp.tracking",),
    ("ragexp.jobs", "ragexp.judge_review"),
    ("ragexp.commands",),
    ("ragexp.cli",),
)


def package_of(module: str) -> str:
    """A module's package in :func:`package_graph`: the first two parts of its dotted name."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """``{package: the other packages its modules import}`` of a module graph (:func:`import_graph`)."""
    packages: dict[str, set[str]] = {package_of(name): set() for name in graph}
    for name, targets in graph.items():
        packages[package_of(name)].update(package_of(t) for t in targets if package_of(t) != package_of(name))
    return packages


def layer_breaks(graph: Mapping[str, Iterable[str]], layers: Iterable[Iterable[str]] = LAYERS) -> list[str]:
    """Each import of the module graph that breaks ``layers`` (bottom first), as ``importer -> imported
    (layer i -> layer j)`` (layers counted from 1): one into the importer's own layer or a higher one, or from or into a package
    that no layer names; ``[]`` when the layers hold."""
    rank = {package: i for i, layer in enumerate(layers, 1) for package in layer}
    found = []
    for name in sorted(graph):
        for target in sorted(graph[name]):
            low, high = package_of(target), package_of(name)
            if low != high and (low not in rank or high not in rank or rank[low] >= rank[high]):
                found.append(f"{name} -> {target} (layer {rank.get(high, '?')} -> layer {rank.get(low, '?')})")
    return found


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative), each sorted;
    a graph without circles has none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, as Markdown (Sphinx roles and ````x```` as `x`)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines())
    sentence = re.split(r"(?<=[^.][.!?])\s", paragraph, maxsplit=1)[0]
    return _ROLE.sub(lambda m: f"`{m[1].rsplit('.', 1)[-1] if m[0].split('`')[1].startswith('~') else m[1]}`",
                     sentence).replace("``", "`").replace("|", "\\|")


def where_things_live(root: Path = REPO, package: str = PACKAGE) -> str:
    """docs/structure.md: each package with the packages it imports, each module with its summary."""
    files = modules(root, package)
    graph = import_graph(root, package)

    def group(name: str) -> str:  # the folder under the package: ragexp.data.loaders.beir -> ragexp.data
        parts = name.split(".")
        folder = len(parts) > 2 or files[name].name == "__init__.py"
        return ".".join(parts[:2]) if folder and len(parts) > 1 else parts[0]

    found = circles(graph)
    lines = ["# Where things live", "",
             f"Generated from the code by `python scripts/structure.py --doc` (tests/test_structure.py fails when it",
             "is stale). Each package of `ragexp/`, the other packages it imports, and each module with the first",
             "sentence of its docstring. Import circles between modules: "
             + ("none." if not found else "; ".join(" -> ".join(c) for c in found) + "."), "",
             "Package layers, bottom first (a package imports only packages of lower layers; `LAYERS` in",
             "scripts/structure.py, checked by tests/test_structure.py):", "",
             *[f"{i}. " + ", ".join(f"`{p}`" for p in layer) for i, layer in enumerate(LAYERS, 1)], ""]
    for pkg in sorted({group(name) for name in files}):
        members = sorted(name for name in files if group(name) == pkg)
        uses = sorted({group(target) for name in members for target in graph[name]} - {pkg})
        lines += [f"## `{pkg}`", "", *([summary(files[pkg]), ""] if pkg in files else []),
                  "Imports: " + (", ".join(f"`{u}`" for u in uses) if uses else "nothing of ragexp") + ".", "",
                  "| module | what it is |", "|---|---|"]
        lines += [f"| `{name}` | {summary(files[name])} |" for name in members if name != pkg]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv == ["--doc"]:
        DOC.write_text(where_things_live(), encoding="utf-8")
        print(f"wrote {DOC}")
        return 0
    graph = import_graph()
    packages = package_graph(graph)
    for package in sorted(packages):
        print(f"{package} -> {', '.join(sorted(packages[package])) or '(nothing of ragexp)'}")
    found = circles(graph)
    for circle in found:
        print("import circle: " + " -> ".join(circle))
    package_circles = circles(packages)
    for circle in package_circles:
        print("package circle (each imports the others, directly or not): " + ", ".join(circle))
    breaks = layer_breaks(graph)
    for line in breaks:
        print("layer broken: " + line)
    return 1 if found or package_circles or breaks else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
