"""The ``system`` config group: which system a run scores, checked and built.

``system=reference`` (the default) is ragexp's own pipeline from the other groups. A black box
(``http``, ``python``, ``recorded``) replaces the chunking, retrieval, reranker and generator
groups: they are not used, not hashed and not logged for it (:func:`unused_groups`), and a
generator is refused (the system's own answers are judged). Each kind takes a closed set of keys
(:data:`KEYS`): an unknown key is refused naming the closest known one, a required one left
``???`` names what to set. Checks run before any work (:func:`check_system`); building reads a
recorded file and imports a registered class (:func:`build_system`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from ragexp.errors import RagexpInputError
from ragexp.systems.locate import LocateOptions
from ragexp.systems.passage_header import HeaderTemplate
from ragexp.systems.response import ResponseFields

REFERENCE = "reference"
KINDS = ("http", "python", "recorded")
COMMON = {"name", "response", "version", "locate", "cache"}
KEYS = {
    "http": COMMON | {"url", "request", "concurrency", "timeout_s", "query_timeout_s", "max_retries", "backoff_base_s",
                      "backoff_max_s", "rate_limit_per_s", "max_response_bytes", "secret_env", "auth_header", "auth_scheme",
                      "deadline_s", "max_failed_queries"},
    "python": COMMON | {"target", "options", "concurrency", "deadline_s", "max_failed_queries"},
    "recorded": COMMON | {"path", "id_field", "response_field"},
}
REQUIRED = {"http": "url", "python": "target", "recorded": "path"}
#: The groups a black-box run does not use (its own pipeline replaces them).
REPLACED_GROUPS = ("chunking", "retrieval", "reranker", "generator")


def system_kind(config: Mapping[str, Any]) -> str:
    """``reference`` or the black-box kind a resolved config's ``system`` group names."""
    node = config.get("system")
    if not isinstance(node, Mapping):
        return REFERENCE
    return str(node.get("name") or REFERENCE)


def is_black_box(config: Mapping[str, Any]) -> bool:
    return system_kind(config) in KINDS


def unused_groups(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The groups a run with this config does not use: the pipeline groups for a black box."""
    return REPLACED_GROUPS if is_black_box(config) else ()


def _number(node: Mapping, key: str, low: float, high: float, *, integer: bool = False, optional: bool = False) -> None:
    value = node.get(key)
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or (isinstance(value, float) and not math.isfinite(value)) \
            or not low <= value <= high:
        what = "a whole number" if integer else "a number"
        raise RagexpInputError(f"must be {what} in [{low:g}, {high:g}], got {value!r}", field=f"system.{key}")


def check_system(config: Mapping[str, Any]) -> None:
    """Refuse a bad ``system`` block before any work (module docstring)."""
    node = config.get("system")
    kind = system_kind(config)
    if kind == REFERENCE:
        if isinstance(node, Mapping) and set(node) - {"name"}:
            extra = sorted(set(node) - {"name"})[0]
            raise RagexpInputError("system=reference takes no options (the pipeline groups describe it); pick a "
                                   "black box first: system=http, system=python or system=recorded",
                                   field=f"system.{extra}")
        return
    if kind not in KINDS:
        raise RagexpInputError(f"unknown system {kind!r}; one of: {REFERENCE}, {', '.join(KINDS)}", field="system.name")
    for key in node:
        if key not in KEYS[kind]:
            close = difflib.get_close_matches(str(key), sorted(KEYS[kind]), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; system={kind} takes: {', '.join(sorted(KEYS[kind]))}"
            raise RagexpInputError(f"not an option of system={kind}{hint}", field=f"system.{key}")
    required = REQUIRED[kind]
    if node.get(required) in (None, "", "???"):
        example = {"url": "http://127.0.0.1:8080/search", "target": "my_rag.pipeline.Pipeline",
                   "path": "outputs.jsonl"}[required]
        raise RagexpInputError(f"is required for system={kind} (e.g. system.{required}={example})",
                               field=f"system.{required}")
    generator = config.get("generator")
    if isinstance(generator, Mapping) and "_target_" in generator:
        raise RagexpInputError(f"system={kind} scores the system's own answers; leave the generator out (generator=none)",
                               field="generator")
    response_fields(node)
    locate_options(node)
    if kind in ("http", "python"):
        _number(node, "deadline_s", 0.001, 30 * 86400, optional=True)
        _number(node, "max_failed_queries", 1, 10**9, integer=True, optional=True)
    if kind == "http":
        _number(node, "concurrency", 1, 256, integer=True)
        _number(node, "timeout_s", 0.001, 3600)
        _number(node, "query_timeout_s", 0.001, 86400)
        _number(node, "max_retries", 0, 100, integer=True)
        _number(node, "backoff_base_s", 0, 600)
        _number(node, "backoff_max_s", 0, 3600)
        _number(node, "rate_limit_per_s", 0.001, 100000, optional=True)
        _number(node, "max_response_bytes", 1, 1 << 31, integer=True)
        if node.get("secret_env") is not None:
            from ragexp.config.secrets import check_env_var_name

            check_env_var_name(node["secret_env"], "system.secret_env")
        request = node.get("request") or {}
        if not isinstance(request, Mapping) or set(request) - {"query_field", "extra"} or \
                not isinstance(request.get("query_field", "query"), str) or not isinstance(request.get("extra") or {}, Mapping):
            raise RagexpInputError("is {query_field: NAME, extra: {FIELD: VALUE, ...}}", field="system.request")
    elif kind == "python":
        _number(node, "concurrency", 1, 256, integer=True)
        if not isinstance(node.get("options") or {}, Mapping):
            raise RagexpInputError("is a mapping of the class's constructor options", field="system.options")
        from ragexp.config.targets import check_component, component_class

        component_class(node["target"], "system.target")
        check_component({"_target_": node["target"], **dict(node.get("options") or {})}, "system.options")
    elif kind == "recorded":
        from ragexp.stored.limits import check_file
        from ragexp.systems.recorded import MAX_BYTES

        try:
            check_file(node["path"], max_bytes=MAX_BYTES)
        except RagexpInputError as err:
            raise RagexpInputError(err.message, file=err.file, field="system.path") from None


def response_fields(node: Mapping[str, Any]) -> ResponseFields:
    block = node.get("response") or {}
    known = set(ResponseFields.__dataclass_fields__)
    if not isinstance(block, Mapping) or set(block) - known:
        extra = sorted(set(block) - known)[0] if isinstance(block, Mapping) else None
        raise RagexpInputError(f"the response fields are {', '.join(sorted(known))}",
                               field=f"system.response.{extra}" if extra else "system.response")
    for key, value in block.items():
        if key == "template":
            if value is not None:
                HeaderTemplate.parse(value)
            continue
        if value is not None and (not isinstance(value, str) or not value):
            raise RagexpInputError("is a dotted field path such as data.results, or null", field=f"system.response.{key}")
        if key in ("passages", "text") and value is None:
            raise RagexpInputError("cannot be null: a system's passages and their text are what is scored",
                                   field=f"system.response.{key}")
    return ResponseFields(**dict(block))


def locate_options(node: Mapping[str, Any]) -> LocateOptions:
    block = node.get("locate") or {}
    known = set(LocateOptions.__dataclass_fields__)
    if not isinstance(block, Mapping) or set(block) - known:
        raise RagexpInputError(f"the locate options are {', '.join(sorted(known))}", field="system.locate")
    return LocateOptions(**dict(block))


def build_system(node: Mapping[str, Any]) -> Any:
    """The system object of a checked black-box block."""
    kind = node["name"]
    fields = response_fields(node)
    if kind == "http":
        from ragexp.systems.http_system import HttpSystem

        request = node.get("request") or {}
        return HttpSystem(node["url"], fields, query_field=request.get("query_field", "query"), extra=request.get("extra"),
                          concurrency=node.get("concurrency", 4), timeout_s=node.get("timeout_s", 30.0),
                          query_timeout_s=node.get("query_timeout_s", 60.0),
                          max_retries=node.get("max_retries", 3), backoff_base_s=node.get("backoff_base_s", 0.5),
                          backoff_max_s=node.get("backoff_max_s", 10.0), rate_limit_per_s=node.get("rate_limit_per_s"),
                          max_response_bytes=node.get("max_response_bytes", 8_000_000),
                          secret_env=node.get("secret_env"), auth_header=node.get("auth_header", "Authorization"),
                          auth_scheme=node.get("auth_scheme", "Bearer"), version=node.get("version"))
    if kind == "python":
        from ragexp.systems.python_system import PythonSystem

        return PythonSystem(node["target"], fields, options=node.get("options"), concurrency=node.get("concurrency", 1),
                            version=node.get("version"))
    from ragexp.systems.recorded import RecordedSystem

    return RecordedSystem(node["path"], fields, id_field=node.get("id_field", "query_id"),
                          response_field=node.get("response_field"), version=node.get("version"))
