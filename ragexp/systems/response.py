"""A system's answer to one query, read from untrusted JSON into closed, typed structures.

Whatever a system sent (an HTTP body, a callable's return value, a recorded line) is data from
outside this machine. :func:`read_answer` takes its already-parsed JSON value (bounded by
:mod:`ragexp.stored.limits`) and the configured field paths (:class:`ResponseFields`, dotted:
``data.results``) and returns a :class:`SystemAnswer` or raises :class:`SystemCallError` of kind
``malformed`` naming the field: passages a list (of objects, or of strings: text only), each
text a string, a document id or path a string or integer, a score a number, the answer a string
or null; at most :data:`MAX_PASSAGES` passages of at most :data:`MAX_PASSAGE_CHARS` characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_PASSAGES = 1000
MAX_PASSAGE_CHARS = 200_000
MAX_ANSWER_CHARS = 200_000

#: Failure kinds of a system call, each reported on one line (:func:`ragexp.systems.fetch.failure_line`).
FAILURE_KINDS = ("connection", "timeout", "redirect", "http_4xx", "http_5xx", "too_large", "malformed", "raised", "missing")


class SystemCallError(Exception):
    """One query the system did not answer usably: ``kind`` in :data:`FAILURE_KINDS`."""

    def __init__(self, kind: str, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.kind, self.message, self.attempts = kind, message, attempts


@dataclass(frozen=True)
class ResponseFields:
    """Where a response keeps its parts: dotted paths; ``None`` = the system does not send it."""

    passages: str = "passages"
    text: str = "text"
    doc_id: str | None = "doc_id"
    path: str | None = "path"
    title: str | None = "title"
    score: str | None = "score"
    answer: str | None = "answer"
    #: Not a field path: how the system wraps each passage's text with its metadata, e.g.
    #: ``"Title: {title}\n\n{content}"`` (:mod:`ragexp.systems.passage_header`); ``None``: the
    #: known headers are recognised.
    template: str | None = None


@dataclass(frozen=True)
class Passage:
    text: str
    doc_id: str | None = None
    path: str | None = None
    title: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class SystemAnswer:
    """The passages a system returned for one query, best first, and its answer if it gave one."""

    passages: tuple[Passage, ...]
    answer: str | None = None


def _lookup(value: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` at dotted ``path`` below ``value`` (objects only)."""
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _optional_name(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SystemCallError("malformed", f"{where} is {_kind(value)}, not text")
    text = str(value)
    if len(text) > 4096:
        raise SystemCallError("malformed", f"{where} is {len(text):,} characters long, more than 4,096")
    return text


def read_answer(payload: Any, fields: ResponseFields = ResponseFields()) -> SystemAnswer:
    """The typed answer in ``payload`` (module docstring); a bare list is the passages."""
    found, passages = (True, payload) if isinstance(payload, list) else _lookup(payload, fields.passages)
    if not found:
        raise SystemCallError("malformed", f"the response has no {fields.passages!r} field (system.response.passages)"
                              if isinstance(payload, Mapping) else f"the response is {_kind(payload)}, not an object")
    if not isinstance(passages, list):
        raise SystemCallError("malformed", f"{fields.passages!r} is {_kind(passages)}, not a list")
    if len(passages) > MAX_PASSAGES:
        raise SystemCallError("malformed", f"{len(passages):,} passages, more than the {MAX_PASSAGES:,} read")
    return SystemAnswer(tuple(_passage(p, i, fields) for i, p in enumerate(passages)), _answer(payload, fields))


def _passage(raw: Any, i: int, fields: ResponseFields) -> Passage:
    where = f"passage {i + 1}"
    if isinstance(raw, str):
        return Passage(_text(raw, where))
    if not isinstance(raw, Mapping):
        raise SystemCallError("malformed", f"{where} is {_kind(raw)}, not an object or text")
    found, text = _lookup(raw, fields.text)
    if not found:
        raise SystemCallError("malformed", f"{where} has no {fields.text!r} field (system.response.text)")
    values = {}
    for name in ("doc_id", "path", "title"):
        path = getattr(fields, name)
        values[name] = _optional_name(_lookup(raw, path)[1], f"{where}'s {path!r}") if path else None
    score = _lookup(raw, fields.score)[1] if fields.score else None
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)):
        raise SystemCallError("malformed", f"{where}'s {fields.score!r} is {_kind(score)}, not a finite number")
    return Passage(_text(text, f"{where}'s {fields.text!r}"), score=None if score is None else float(score), **values)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SystemCallError("malformed", f"{where} is {_kind(value)}, not text")
    if len(value) > MAX_PASSAGE_CHARS:
        raise SystemCallError("malformed", f"{where} is {len(value):,} characters, more than {MAX_PASSAGE_CHARS:,}")
    return value


def _answer(payload: Any, fields: ResponseFields) -> str | None:
    if fields.answer is None or isinstance(payload, list):
        return None
    answer = _lookup(payload, fields.answer)[1]
    if answer is None:
        return None
    if not isinstance(answer, str):
        raise SystemCallError("malformed", f"the answer {fields.answer!r} is {_kind(answer)}, not text")
    if len(answer) > MAX_ANSWER_CHARS:
        raise SystemCallError("malformed", f"the answer is {len(answer):,} characters, more than {MAX_ANSWER_CHARS:,}")
    return answer
