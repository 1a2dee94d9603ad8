"""Which ``_target_`` s a config may instantiate: a registry of component CLASSES.

A ``_target_`` is imported and called with the config's values, so a config read from a shared
store (``ragexp reproduce``) or handed over as ``--config-path`` could otherwise run any callable:
``logging.FileHandler`` truncating a file, or a function inside ragexp itself
(``ragexp.judging.calibration.write_labels`` overwriting a file with attacker text). So a
``_target_`` must name, exactly, one of

- the component classes ragexp ships, :data:`SHIPPED` (retrievers, rerankers, encoders,
  generators, judges, chat models, chunkers, dataset loaders, the sweep callback);
- a class registered by an installed package as an entry point of the ``ragexp.components``
  group: ``my_retriever = "my_rag.search:MyRetriever"`` in its
  ``[project.entry-points."ragexp.components"]`` registers exactly ``my_rag.search.MyRetriever``.

The name is checked before anything is imported; then the object must be a class defined under
that very name (no function, method, re-exported object or module attribute), and the block is
checked against the class's own schema, its constructor (:func:`check_component`): every key a
parameter, simple types matching their annotation, and none of Hydra's call-shaping keys
(``_partial_``, ``_args_``, ``_recursive_``, ``_convert_``). Only then is it built.
"""

from __future__ import annotations

import inspect
import math
import os
import typing
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from ragexp.config.bounds import COMPONENT_COUNTS, check_count
from ragexp.errors import RagexpInputError

ENTRY_POINT_GROUP = "ragexp.components"
#: The former allow-list of module prefixes; ignored, named in the refusal when it is still set.
REMOVED_PREFIX_ENV = "RAGEXP_ALLOWED_TARGETS"

#: The component classes ragexp ships, by kind (``module.Class``; strings, so nothing is imported to check one).
SHIPPED_BY_KIND: dict[str, tuple[str, ...]] = {
    "retriever": ("reference_pipelines.bm25.BM25Retriever", "reference_pipelines.dense.DenseRetriever",
                  "reference_pipelines.hybrid.HybridRetriever"),
    "reranker": ("reference_pipelines.rerank.CrossEncoderReranker", "reference_pipelines.rerank.EmbeddingReranker"),
    "encoder": ("reference_pipelines.encoders.Embedding", "ragexp.models.encoders.SentenceTransformerEncoder",
                "ragexp.models.encoders.OnnxEncoder"),
    "generator": ("reference_pipelines.generators.extractive.ExtractiveGenerator",
                  "reference_pipelines.generators.llm.LLMGenerator"),
    "judge": ("ragexp.judging.judges.LexicalJudge", "ragexp.judging.judges.EmbeddingJudge",
              "ragexp.judging.judges.LocalLikelihoodJudge", "ragexp.judging.judges.LLMJudge"),
    "chat model": ("ragexp.llm.local_hf.LocalHFModel", "ragexp.llm.openai_compat.OpenAIChatModel"),
    "chunker": ("ragexp.chunking.whole.WholeDocumentChunker", "ragexp.chunking.fixed.FixedSizeChunker",
                "ragexp.chunking.sentence.SentenceChunker", "ragexp.chunking.recursive.RecursiveChunker",
                "ragexp.chunking.markdown.MarkdownChunker"),
    "dataset loader": ("ragexp.data.dataset.DemoDataset", "ragexp.data.dataset.BeirDataset",
                       "ragexp.data.dataset.SquadDataset", "ragexp.data.dataset.EvalsetDataset"),
    "sweep callback": ("ragexp.tracking.sweep.MlflowSweepCallback",),
    "sweeper": ("hydra_plugins.ragexp_sweeper.ragexp_sweeper.RagexpSweeper",),
}  # fmt: skip
SHIPPED = frozenset(name for names in SHIPPED_BY_KIND.values() for name in names)
#: Targets that runs saved by earlier releases name, and the shipped class that replaced each with
#: the same parameters (the embedding group built its encoder through a factory function until
#: 2026-12-04). :func:`ragexp.config.run_config.parse_run_config` reads a saved config with the new
#: name and says so; anywhere else the old name is refused with the new one in the message.
RENAMED: dict[str, str] = {"reference_pipelines.encoders.make_encoder": "reference_pipelines.encoders.Embedding"}

#: Hydra keys that change how a target is called (positional arguments, a partial, no recursion).
CALL_KEYS = frozenset({"_partial_", "_args_", "_recursive_", "_convert_"})
#: Labels a config group carries beside the component's parameters (not passed to the constructor).
LABEL_KEYS = frozenset({"name", "loader"})
HOW_TO_REGISTER = (
    f"register your own component class as an entry point of the '{ENTRY_POINT_GROUP}' group in your package "
    "(README: 'Your own components')"
)


@lru_cache(maxsize=1)
def registered_entry_points() -> frozenset[str]:
    """``module.Class`` of every ``ragexp.components`` entry point (``module:Class``)."""
    return frozenset(ep.value.replace(":", ".").strip() for ep in entry_points(group=ENTRY_POINT_GROUP))


def is_registered(target: str) -> bool:
    return target in SHIPPED or target in registered_entry_points()


def component_class(target: Any, field: str) -> Any:
    """The registered class ``target`` names (imported only once the name is found registered)."""
    if not isinstance(target, str) or not target:
        raise RagexpInputError(f"must be a registered component class such as reference_pipelines.bm25.BM25Retriever, "
                               f"got {target!r}", field=field)
    if target in RENAMED:
        raise RagexpInputError(f"_target_ {target!r} was replaced by the component class {RENAMED[target]!r} (same "
                               "parameters): change the _target_; `ragexp reproduce` reads a saved run's config "
                               "with the new name", field=field)
    if not is_registered(target):
        removed = (f"; ${REMOVED_PREFIX_ENV} (set here) was removed: a module prefix let that module's functions "
                   "through") if os.environ.get(REMOVED_PREFIX_ENV) else ""
        raise RagexpInputError(f"_target_ {target!r} is not a registered component class: ragexp builds only the "
                               f"component classes it ships and those registered on this machine; {HOW_TO_REGISTER}"
                               f"{removed}", field=field)
    from hydra.utils import get_object

    try:
        obj = get_object(target)
    except Exception as err:  # noqa: BLE001 - any import failure is a bad _target_
        raise RagexpInputError(f"cannot import {target!r}: {err}", field=field) from None
    defined_as = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if not inspect.isclass(obj) or defined_as != target:
        raise RagexpInputError(f"_target_ {target!r} is registered but is not a class defined under that name "
                               f"({defined_as}); only classes are components", field=field)
    return obj


def rename_saved_targets(node: Any, field: str = "") -> list[str]:
    """Replace every :data:`RENAMED` ``_target_`` in ``node`` (a plain container, changed in place)
    by its new name; the fields changed, as ``field: old -> new``."""
    changed = []
    if isinstance(node, dict):
        target = node.get("_target_")
        if isinstance(target, str) and target in RENAMED:
            node["_target_"] = RENAMED[target]
            changed.append(f"{field + '.' if field else ''}_target_: {target} -> {RENAMED[target]}")
        for key, value in node.items():
            changed += rename_saved_targets(value, f"{field}.{key}" if field else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            changed += rename_saved_targets(value, f"{field}[{i}]")
    return changed


def check_component(node: Any, field: str) -> None:
    """Check every ``_target_`` block in ``node`` (mappings and lists at any depth) against the
    registry and its class's schema, naming the field; nothing unregistered is imported."""
    if isinstance(node, Mapping):
        for key in node:
            if key in CALL_KEYS:
                raise RagexpInputError(f"{key} is not allowed in a config: components are built from their own "
                                       "parameters only", field=f"{field}.{key}")
        if "_target_" in node:
            _check_parameters(component_class(node["_target_"], f"{field}._target_"), node, field)
        for key, value in node.items():
            if key != "_target_":
                check_component(value, f"{field}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            check_component(value, f"{field}[{i}]")


_SIMPLE = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}
_SIMPLE_NAMES = {(int,): "an integer", (int, float): "a number", (str,): "a string", (bool,): "true or false"}


def _check_parameters(cls: Any, node: Mapping, field: str) -> None:
    """The block's keys must be parameters of the class's constructor (unless it takes
    ``**kwargs``) and a value of a parameter annotated ``int``/``float``/``str``/``bool`` (or
    ``Optional`` of one) must have that type; no number is NaN or infinite; an integer parameter
    named in :data:`~ragexp.config.bounds.COMPONENT_COUNTS` must fall in its range."""
    init = cls.__init__
    try:
        params = inspect.signature(init).parameters
    except (TypeError, ValueError):
        return
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # noqa: BLE001 - an annotation this Python cannot evaluate: names are still checked
        hints = {}
    known = [name for name, p in params.items() if name not in ("self", "cache") and p.kind not in
             (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    for key, value in node.items():
        if key == "_target_" or key in LABEL_KEYS:
            continue
        if key not in params or key in ("self", "cache"):
            if open_ended:
                continue
            raise RagexpInputError(f"unknown parameter of {cls.__name__}; its parameters: {', '.join(known) or 'none'}",
                                   field=f"{field}.{key}")
        if isinstance(value, float) and not math.isfinite(value):
            raise RagexpInputError(f"must be a finite number, got {value}", field=f"{field}.{key}")
        allowed = _simple_types(hints.get(key))
        if allowed and value is not None and not (isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)):
            raise RagexpInputError(f"must be {_SIMPLE_NAMES[allowed]}, got {value!r}",
                                   field=f"{field}.{key}")
        if key in COMPONENT_COUNTS and isinstance(value, int) and not isinstance(value, bool):
            low, high = COMPONENT_COUNTS[key]
            check_count(value, f"{field}.{key}", low=low, high=high)


def _simple_types(hint: Any) -> tuple[type, ...]:
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    args = typing.get_args(hint)
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and rest[0] in _SIMPLE:
            return _SIMPLE[rest[0]]
    return ()
