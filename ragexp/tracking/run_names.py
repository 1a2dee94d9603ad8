"""Run names: what a run is called and labelled in MLflow, derived from the sweep it belongs to.

- **Sweep axes** are the override keys a multirun varies (``chunking``, ``retrieval``,
  ``retrieval.k1``, ``retrieval/tokenizer``, ``eval.ks`` ...), read from the sweep's own overrides
  and sweeper params, never from a list of known groups: whatever a user sweeps is an axis.
- **Run name**: the job's value on every axis, in the sweep's order, joined by `` · ``
  (``markdown-1024 · hybrid_rrf · rerank=none``). A chunking axis shows the chunker's label (kind
  and size), a retrieval axis its option name; any other axis ``<last key part>=<value>``. Outside
  a sweep the name is the pipeline's identity: chunking · retrieval · reranker (· generator).
  An encoder precision other than ``fp32`` (``embedding.precision=int8``) is named too
  (``· int8``) unless an axis already names it: fp32 and int8 runs of one config differ in
  their vectors, their scores and their cost, and must not share a name.
- **Axis tags** ``axis.<key>`` = the job's value, one per axis, so MLflow's "Group by", columns
  and parallel coordinates can use them.
- **Params**: the semantic config flattened to what the variant uses: unset options left out,
  scalar lists as ``1,3,5``, lists of mappings by index (``retrieval.retrievers.0.k1``), the
  ``embedding`` group only inside the components that embed it, the judge only with a
  generator; plus one readable label per component (``chunking``, ``retrieval``, ``reranker``,
  ``embedding`` when used, ``generator``, ``judge``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pathlib import PurePath
from urllib.parse import urlsplit

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from ragexp.systems.build import is_black_box, unused_groups

AXIS_TAG_PREFIX = "axis."
SEPARATOR = " · "
PARAM_VALUE_LIMIT = 6000
REPRODUCTION_PREFIX = "repro: "


def _parse(overrides: Iterable[str]) -> list:
    """Each override parsed on its own; one Hydra rejects (it stops the run before any job) is skipped."""
    parser, parsed = OverridesParser.create(), []
    for override in overrides:
        try:
            parsed += parser.parse_overrides([override])
        except HydraException:
            continue
    return parsed


def sweep_axes(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None) -> list[str]:
    """The keys a multirun varies: sweeper params (``hydra.sweeper.params``, e.g. from an
    ``experiment`` preset) then command-line overrides, each a sweep of more than one value;
    Hydra's own keys are not axes."""
    entries = [f"{key}={value}" for key, value in (sweeper_params or {}).items()] + list(task_overrides)
    axes: list[str] = []
    for override in _parse(entries):
        key = override.key_or_group
        if override.is_hydra_override() or key == "hydra" or key.startswith(("hydra.", "hydra/")) \
                or not override.is_sweep_override():
            continue
        if override.is_discrete_sweep() and len(list(override.sweep_string_iterator())) < 2:
            continue
        if key not in axes:
            axes.append(key)
    return axes


def axis_values(job_overrides: Sequence[str], axes: Sequence[str]) -> dict[str, str]:
    """``{axis: the job's value}`` from the job's overrides (``eval.ks=[1,3,5]`` -> ``1,3,5``)."""
    values = {}
    for override in _parse(job_overrides):
        if override.key_or_group in axes and not override.is_sweep_override():
            values[override.key_or_group] = _display(override.get_value_element_as_str())
    return {axis: values[axis] for axis in axes if axis in values}


def _display(value: str) -> str:
    value = value.replace("\\", "")
    return value[1:-1].replace(", ", ",") if value.startswith("[") and value.endswith("]") else value


def axis_label(axis: str, value: str, chunking_label: str) -> str:
    """How one axis value reads in a run name (see the module docstring)."""
    if axis == "chunking" or axis.startswith("chunking."):
        return chunking_label
    if axis == "retrieval":
        return value
    if axis == "reranker":
        return f"rerank={value}"
    short = axis.replace("/", ".").rsplit(".", 1)[-1]
    return f"{short}={value}"


def run_name(cfg: Mapping[str, Any], chunking_label: str, axis_values: Mapping[str, str] | None = None,
             sample_size: int | None = None) -> str:
    """The run's name: its sweep-axis values, else its pipeline identity (module docstring)."""
    if axis_values:
        parts = []
        for axis, value in axis_values.items():
            label = axis_label(axis, value, chunking_label)
            if label not in parts:  # chunking and chunking.size read as one label
                parts.append(label)
    elif "system" in (labels := component_labels(cfg, chunking_label)):
        parts = [labels["system"]]
    else:
        parts = [labels["chunking"], labels["retrieval"], f"rerank={labels['reranker']}"]
        if labels["generator"] != "none":
            parts.append(f"gen={labels['generator']}")
    precision = precision_label(cfg)
    if precision and not any(precision in part for part in parts):
        parts.append(precision)
    if sample_size is not None:
        parts.append(f"sample={sample_size}")
    return SEPARATOR.join(parts)


def _precisions(node: Any) -> set[str]:
    if isinstance(node, Mapping):
        found = {str(node["precision"])} if isinstance(node.get("precision"), str) else set()
        return found.union(*(_precisions(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_precisions(value) for value in node))
    return set()


def precision_label(config: Mapping[str, Any]) -> str:
    """``"int8"`` (or ``"fp32+int8"``...) when an encoder the run uses runs at a precision other
    than fp32, else ``""``: the ``precision`` of every encoder block in the groups it uses."""
    used = used_config(config)
    found = _precisions({key: value for key, value in used.items() if key in ("retrieval", "reranker", "generator", "judge")})
    return "+".join(sorted(found)) if found - {"fp32"} else ""


def reproduction_name(original_name: str) -> str:
    return f"{REPRODUCTION_PREFIX}{original_name}"


def axis_tags(axis_values: Mapping[str, str]) -> dict[str, str]:
    return {f"{AXIS_TAG_PREFIX}{axis}": value for axis, value in axis_values.items()}


def _name(node: Any, default: str = "none") -> str:
    if not isinstance(node, Mapping):
        return default
    if "_target_" not in node:
        return str(node.get("name") or default)
    return str(node.get("name") or node["_target_"].rsplit(".", 1)[-1])


def _contains(tree: Any, needle: Mapping) -> bool:
    if isinstance(tree, Mapping):
        return tree == needle or any(_contains(v, needle) for v in tree.values())
    if isinstance(tree, list):
        return any(_contains(v, needle) for v in tree)
    return False


def _uses_embedding(config: Mapping[str, Any]) -> bool:
    """Whether a component embeds the ``embedding`` group (``encoder: ${embedding}`` resolves to a copy)."""
    embedding = config.get("embedding")
    return isinstance(embedding, Mapping) and any(_contains(config.get(group), embedding)
                                                   for group in ("retrieval", "reranker", "generator"))


def _generates(config: Mapping[str, Any]) -> bool:
    return isinstance(config.get("generator"), Mapping) and "_target_" in config["generator"]


def system_label(node: Mapping[str, Any]) -> str:
    """``http: host:port/path``, ``python: Class``, ``recorded: file.jsonl``: a black box, readably."""
    kind = str(node.get("name"))
    if kind == "http":
        parts = urlsplit(str(node.get("url") or ""))
        where = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"
    elif kind == "python":
        where = str(node.get("target") or "").rsplit(".", 1)[-1]
    else:
        where = PurePath(str(node.get("path") or "")).name
    return f"{kind}: {where}"


def component_labels(config: Mapping[str, Any], chunking_label: str) -> dict[str, str]:
    """One readable label per component of the resolved config (module docstring); a black-box
    system is one label (``system``) in place of the pipeline groups it replaces."""
    if is_black_box(config):
        return {"system": system_label(config["system"]), "judge": _name(config.get("judge"))}
    labels = {"chunking": chunking_label, "retrieval": _name(config.get("retrieval"), "custom"),
              "reranker": _name(config.get("reranker")), "generator": _name(config.get("generator"))}
    if _uses_embedding(config):
        labels["embedding"] = _name(config.get("embedding"))
    if _generates(config):
        labels["judge"] = _name(config.get("judge"))
    return labels


def used_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The semantic config without the groups this variant does not use: ``embedding`` (it
    appears inside the components that embed it), ``judge`` without a generator or a black-box
    system, and the pipeline groups a black-box system replaces."""
    out = {k: v for k, v in config.items() if k != "embedding" and k not in unused_groups(config)}
    if not _generates(config) and not is_black_box(config):
        out.pop("judge", None)
    return out


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1, "c": None}, "ks": [1, 5], "r": [{"k": 2}]}`` ->
    ``{"a.b": "1", "ks": "1,5", "r.0.k": "2"}``; unset values are left out, long values cut."""
    out: dict[str, str] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, Mapping):
            out.update(flatten_params(value, f"{path}."))
        elif isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
            out.update(flatten_params({str(i): v for i, v in enumerate(value)}, f"{path}."))
        else:
            text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
            out[path] = text if len(text) <= PARAM_VALUE_LIMIT else text[: PARAM_VALUE_LIMIT - 3] + "..."
    return out


def run_params(config: Mapping[str, Any], chunking_label: str) -> dict[str, str]:
    """Everything a run logs as params, before the constants (see the module docstring)."""
    return {**flatten_params(used_config(config)), **component_labels(config, chunking_label)}
