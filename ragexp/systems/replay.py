"""Re-scoring a logged black-box run from the responses stored with it, and what changed live.

- :func:`replay_config`: a saved run's ``system`` block turned into ``system=recorded`` over its
  own ``system/responses.jsonl`` artifact (:data:`ragexp.evaluation.system_step.RESPONSES_ARTIFACT`), with
  the same response fields and locate options: ``ragexp reproduce RUN_ID`` scores exactly what the
  system answered then, without calling it.
- :func:`drift`: per query, how a live call's answer differs from the stored one (``ragexp
  reproduce RUN_ID --live``): the passages (the same list, the same set reordered, or how many
  entered and left), the top-k, and the answer text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragexp.systems.response import SystemAnswer

#: Where ragexp's own artifact keeps the query id and the raw response (:meth:`ragexp.systems.fetch.Fetched.to_record`).
ID_FIELD, RESPONSE_FIELD = "query_id", "response"


def replay_config(node: Mapping[str, Any], responses_path: str) -> dict:
    """``system=recorded`` over a run's stored responses, reading them as the run read its system."""
    replay = {"name": "recorded", "path": responses_path, "id_field": ID_FIELD, "response_field": RESPONSE_FIELD}
    for key in ("response", "version", "locate"):
        if key in node:
            replay[key] = node[key]
    return replay


@dataclass(frozen=True)
class QueryDrift:
    query_id: str
    entered: int  # passages now returned that were not before
    left: int  # passages returned before and not now
    reordered: bool  # the same passages in another order
    top_changed: bool  # the first ``k`` passages differ
    answer_changed: bool

    @property
    def changed(self) -> bool:
        return bool(self.entered or self.left or self.reordered or self.answer_changed)

    def describe(self, k: int) -> str:
        parts = []
        if self.entered or self.left:
            parts.append(f"{self.entered} passages entered, {self.left} left")
        elif self.reordered:
            parts.append("same passages, reordered")
        if self.top_changed:
            parts.append(f"top {k} changed")
        if self.answer_changed:
            parts.append("answer changed")
        return f"{self.query_id}: {', '.join(parts)}"


def _keys(answer: SystemAnswer) -> list[tuple]:
    return [(p.text, p.doc_id, p.path) for p in answer.passages]


def drift(before: Mapping[str, SystemAnswer], after: Mapping[str, SystemAnswer], k: int = 5) -> list[QueryDrift]:
    """Each query answered both times, in ``after``'s order, compared (module docstring)."""
    out = []
    for query_id, now in after.items():
        then = before.get(query_id)
        if then is None:
            continue
        old, new = _keys(then), _keys(now)
        entered = sum(1 for p in set(new) if p not in set(old))
        left = sum(1 for p in set(old) if p not in set(new))
        out.append(QueryDrift(query_id, entered, left, reordered=not entered and not left and old != new,
                              top_changed=old[:k] != new[:k], answer_changed=then.answer != now.answer))
    return out


def drift_report(drifts: list[QueryDrift], k: int = 5, limit: int = 20) -> str:
    """Lines for the terminal: the count, then each changed query (at most ``limit``)."""
    changed = [d for d in drifts if d.changed]
    head = (f"drift: {len(changed)} of {len(drifts)} queries answered differently live "
            f"(passages {sum(bool(d.entered or d.left or d.reordered) for d in changed)}, "
            f"answers {sum(d.answer_changed for d in changed)})")
    lines = [head, *(f"  {d.describe(k)}" for d in changed[:limit])]
    if len(changed) > limit:
        lines.append(f"  ... and {len(changed) - limit} more")
    return "\n".join(lines)


def stored_drift(stored: str | Path, node: Mapping[str, Any], responses_now: str, k: int = 5) -> list[QueryDrift]:
    """:func:`drift` between a run's stored ``system/responses.jsonl`` (untrusted: read through the
    gate as ``system=recorded`` reads a file) and the same artifact of a live call (``responses_now``)."""
    from ragexp.stored.limits import parse_json
    from ragexp.systems.build import response_fields
    from ragexp.systems.recorded import RecordedSystem
    from ragexp.systems.response import read_answer

    fields = response_fields(node)
    then = {query_id: read_answer(response, fields) for query_id, (response, _) in
            RecordedSystem(str(stored), fields, id_field=ID_FIELD, response_field=RESPONSE_FIELD).lines.items()}
    now = {}
    for line in responses_now.splitlines():
        record = parse_json(line)
        now[record[ID_FIELD]] = read_answer(record[RESPONSE_FIELD], fields)
    return drift(then, now, k)
