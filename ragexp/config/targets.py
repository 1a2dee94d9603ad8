"""Which ``_target_`` s a config may instantiate: the components ragexp ships and those the user allows.

A ``_target_`` is imported and called with the config's values, so a config read from a shared
store (``ragexp reproduce``) or handed over as ``--config-path`` could otherwise run any callable
(``logging.FileHandler`` truncating a file, ``os.system``). Allowed are:

- the component packages ragexp ships, :data:`SHIPPED`; not the whole ``ragexp`` package
  (``ragexp.cli.main`` would run any ragexp command, e.g. an export overwriting a file);
- module prefixes listed in ``$RAGEXP_ALLOWED_TARGETS`` (comma-separated: ``my_rag,acme.retrievers``);
- entry points of the ``ragexp.components`` group: ``my_retriever = "my_rag.search:MyRetriever"``
  in a package's ``[project.entry-points."ragexp.components"]`` allows exactly ``my_rag.search.MyRetriever``.

A prefix matches on module-path boundaries (``my_rag`` allows ``my_rag.x.Y``, not ``my_rag_evil.Y``).
The check is by name first, so a module outside the list is never imported; then the object the
name resolves to must be defined in an allowed module too (``reference_pipelines.bm25.np.save``
reaches NumPy through an allowed module and is refused).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from hydra.utils import get_object

from ragexp.errors import RagexpInputError

SHIPPED = ("reference_pipelines", "ragexp.judging", "ragexp.llm")
ALLOWED_TARGETS_ENV = "RAGEXP_ALLOWED_TARGETS"
ENTRY_POINT_GROUP = "ragexp.components"
HOW_TO_ALLOW = (
    f"to allow it, export {ALLOWED_TARGETS_ENV}=<module prefix> (comma-separated), or register it as an entry point "
    f"of the '{ENTRY_POINT_GROUP}' group in your package"
)


def allowed_prefixes() -> tuple[str, ...]:
    """:data:`SHIPPED` plus the module prefixes of ``$RAGEXP_ALLOWED_TARGETS``."""
    user = [p.strip().rstrip(".") for p in os.environ.get(ALLOWED_TARGETS_ENV, "").split(",")]
    return SHIPPED + tuple(p for p in user if p)


def entry_point_targets() -> frozenset[str]:
    """``module.attr`` of every ``ragexp.components`` entry point (``module:attr``)."""
    return frozenset(ep.value.replace(":", ".").strip() for ep in entry_points(group=ENTRY_POINT_GROUP))


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def check_target(target: Any, field: str) -> None:
    """Refuse ``target`` unless it is allowed (see the module docstring), naming it and ``field``."""
    if not isinstance(target, str) or not target:
        raise RagexpInputError(f"must be a dotted name such as reference_pipelines.bm25.BM25Retriever, got {target!r}",
                               field=field)
    prefixes = allowed_prefixes()
    refusal = (f"_target_ {target!r} is not an allowed component: ragexp instantiates only the components it ships "
               f"({', '.join(SHIPPED)}) and those you allow; {HOW_TO_ALLOW}")
    if not _under(target, prefixes):
        if target in entry_point_targets():  # read last: listing entry points scans every installed package
            return
        raise RagexpInputError(refusal, field=field)
    try:
        obj = get_object(target)
    except Exception as err:  # noqa: BLE001 - any import failure is a bad _target_
        raise RagexpInputError(f"cannot import {target!r}: {err}", field=field) from None
    module = getattr(obj, "__module__", None) or ""
    if not _under(module, prefixes) and target not in entry_point_targets():
        raise RagexpInputError(f"{refusal} (it resolves to an object defined in {module or 'no module'!r})", field=field)


def check_targets(node: Any, field: str) -> None:
    """Check every ``_target_`` in a component config, at any depth of mappings and lists."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "_target_":
                check_target(value, f"{field}._target_")
            else:
                check_targets(value, f"{field}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            check_targets(value, f"{field}[{i}]")
