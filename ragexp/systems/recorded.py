"""``system=recorded``: a JSONL file of a system's outputs per query id, as the team's own harness
or production logs wrote them, or as ragexp stored them with a run (``system/responses.jsonl``).

Each line is an object with the query's id at ``system.id_field`` (default ``query_id``) and the
response either as the line itself or under ``system.response_field`` (ragexp's own artifact:
``response``), in the shape ``system.response`` names; an optional ``latency_ms`` number is the
endpoint latency the recording measured. The file is untrusted data read through the one gate:
a regular file of at most :data:`MAX_BYTES`, strict UTF-8, each line bounded JSON and all lines
together at most :data:`MAX_VALUES` values and :data:`MAX_PRODUCED_BYTES` of Python objects, as
measured while they are parsed (:mod:`ragexp.stored.limits`), an id twice refused; an eval query without a line fails the run
naming the queries (``missing``).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from ragexp.datamodel import EvalItem
from ragexp.errors import RagexpInputError
from ragexp.stored.limits import JsonLinesBudget, iter_lines, read_bytes
from ragexp.systems.response import ResponseFields, SystemCallError

MAX_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 16
#: What all lines may parse into together (:class:`~ragexp.stored.limits.JsonLinesBudget`): a
#: 10,000-question run's responses with ten passages each are ~1M values and ~0.2 GiB.
MAX_VALUES = 8_000_000
MAX_PRODUCED_BYTES = 1024 * 1024 * 1024
LATENCY_FIELD = "latency_ms"


class RecordedSystem:
    kind = "recorded"
    concurrency = 1

    def __init__(self, path: str, fields: ResponseFields, *, id_field: str = "query_id", response_field: str | None = None,
                 version: str | None = None) -> None:
        self.path, self.fields, self.id_field, self.response_field = path, fields, id_field, response_field
        self.version = version
        self.lines: dict[str, tuple[Any, float | None]] = {}
        budget = JsonLinesBudget(path, max_values=MAX_VALUES, max_bytes=MAX_PRODUCED_BYTES)
        digest = hashlib.sha256(b'"')  # stable_hash of the file's text, a line at a time (JSON escapes per character)
        for number, line in iter_lines(read_bytes(path, max_bytes=MAX_BYTES), path):
            digest.update((b"\\n" if number > 1 else b"") + json.dumps(line, ensure_ascii=False)[1:-1].encode("utf-8"))
            if not line.strip():
                continue
            record = budget.parse(line, number, max_depth=MAX_DEPTH)
            if not isinstance(record, dict):
                raise RagexpInputError("each line is a JSON object", file=path, line=number)
            query_id = record.get(id_field)
            if isinstance(query_id, bool) or not isinstance(query_id, (str, int)):
                raise RagexpInputError(f"needs the query id (a string) at {id_field!r} (system.id_field)", file=path,
                                       line=number, field=id_field)
            query_id = str(query_id)
            if query_id in self.lines:
                raise RagexpInputError(f"query id {query_id!r} appears twice; keep one line per query", file=path,
                                       line=number, field=id_field)
            latency = record.get(LATENCY_FIELD)
            if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float))
                                        or not math.isfinite(latency) or latency < 0):
                raise RagexpInputError("must be a non-negative number of milliseconds", file=path, line=number,
                                       field=LATENCY_FIELD)
            if response_field is not None and response_field not in record:
                raise RagexpInputError(f"has no {response_field!r} (system.response_field)", file=path, line=number)
            response = record[response_field] if response_field is not None else record
            self.lines[query_id] = (response, None if latency is None else float(latency))
        digest.update(b'"')
        self.digest = digest.hexdigest()

    def identity(self) -> dict:
        return {"kind": self.kind, "file_sha256": self.digest, "id_field": self.id_field,
                "response_field": self.response_field}

    def label(self) -> str:
        return Path(self.path).name

    def request(self, item: EvalItem) -> dict:
        return {"query_id": item.id}

    def close(self) -> None:
        return None

    def call(self, request: dict) -> tuple[Any, float | None, int]:
        found = self.lines.get(request["query_id"])
        if found is None:
            raise SystemCallError("missing", f"{self.label()} has no line for query {request['query_id']!r}")
        return found[0], found[1], 1
