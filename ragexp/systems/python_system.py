"""``system=python``: a team's pipeline as an installed Python callable.

``system.target`` names a CLASS registered as a ``ragexp.components`` entry point (the
operator's own code, exactly as for components: :mod:`ragexp.config.targets`); it is built with
``system.options`` (checked against its constructor) and called once per eval query,
``instance(query) -> response``, where the response is what an HTTP system would send: an object
``{"passages": [...], "answer": ...}`` (fields as ``system.response`` names them) or a list of
passages (objects or plain strings). The value must be JSON (it is stored with the run); an
exception raised by the call is a failure of kind ``raised`` for that query, never a crash of
the run. Calls are made one at a time unless ``system.concurrency`` says the callable is
thread-safe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from ragexp.config.targets import ENTRY_POINT_GROUP, check_component, component_class
from ragexp.datamodel import EvalItem
from ragexp.stored.limits import parse_json
from ragexp.systems.response import ResponseFields, SystemCallError


class PythonSystem:
    kind = "python"

    def __init__(self, target: str, fields: ResponseFields, *, options: Mapping[str, Any] | None = None,
                 concurrency: int = 1, version: str | None = None) -> None:
        cls = component_class(target, "system.target")
        check_component({"_target_": target, **dict(options or {})}, "system.options")
        self.target, self.fields, self.options = target, fields, dict(options or {})
        self.concurrency = concurrency
        self.version = version
        self.instance = cls(**self.options)
        if not callable(self.instance):
            raise SystemCallError("raised", f"{target} instances are not callable: give the class a __call__(query)")

    def identity(self) -> dict:
        """The class, its options and the installed distribution's version that provides it."""
        return {"kind": self.kind, "target": self.target, "options": self.options, "version": self.version,
                "distribution": _distribution_version(self.target)}

    def label(self) -> str:
        return self.target.rsplit(".", 1)[-1]

    def request(self, item: EvalItem) -> dict:
        return {"query": item.query}

    def close(self) -> None:
        return None

    def call(self, request: dict) -> tuple[Any, float, int]:
        started = time.perf_counter()
        try:
            value = self.instance(request["query"])
        except Exception as err:  # noqa: BLE001 - the operator's code: any exception is this query's failure
            raise SystemCallError("raised", f"{self.target}(query) raised {type(err).__name__}: {err}") from None
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise SystemCallError("malformed", f"{self.target}(query) returned a value that is not JSON ({err})") from None
        return parse_json(text, source=self.target), latency_ms, 1


def _distribution_version(target: str) -> str | None:
    """``name==version`` of the installed distribution registering ``target``, if one does."""
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.value.replace(":", ".").strip() == target and entry.dist is not None:
            return f"{entry.dist.name}=={entry.dist.version}"
    return None
