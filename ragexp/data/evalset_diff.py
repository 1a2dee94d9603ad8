"""What changed between two versions of an eval set, and whether runs on them are comparable.

Both files are loaded against the same corpus exactly as a run loads them, so evidence is compared
as resolved spans (a quote that now resolves elsewhere is a change, a quote rewritten as the same
span is not). Items are matched by ``id``:

- ``added``: ids only in NEW; ``removed``: ids only in OLD;
- ``changed``: ids in both whose query, evidence, gold answer(s), key facts, tags, answerability or
  ``source`` differ (each changed field is named; evidence span by span with its grade, a grade-0
  span shown as "judged not relevant"); ``added`` timestamps and the ``annotator`` are not compared
  (they change no number, as in the fingerprint).

Runs on OLD and NEW are comparable exactly when the fingerprints are equal: the fingerprint names
the MLflow experiment and keys resume, and ``ragexp compare`` / ``ragexp gate`` refuse to rank
runs of different eval sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragexp.datamodel import EvalItem, EvalSet

#: Item fields compared, in report order (``added`` is left out on purpose).
COMPARED_FIELDS = ("query", "evidence", "gold_answer", "answers", "key_facts", "tags", "answerable", "source")


@dataclass
class Change:
    id: str
    fields: dict[str, tuple[object, object]]  # field -> (old, new)


@dataclass
class EvalSetDiff:
    old_fingerprint: str
    new_fingerprint: str
    old_size: int
    new_size: int
    added: list[EvalItem] = field(default_factory=list)
    removed: list[EvalItem] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    unchanged: int = 0
    reordered: bool = False  # the same ids in both, in another order (the fingerprint hashes file order)

    @property
    def comparable(self) -> bool:
        return self.old_fingerprint == self.new_fingerprint

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict:
        return {
            "old": {"fingerprint": self.old_fingerprint, "items": self.old_size},
            "new": {"fingerprint": self.new_fingerprint, "items": self.new_size},
            "comparable": self.comparable,
            "added": [_summary(item) for item in self.added],
            "removed": [_summary(item) for item in self.removed],
            "changed": [{"id": c.id, "fields": {name: {"old": _plain(old), "new": _plain(new)} for name, (old, new) in c.fields.items()}}
                        for c in self.changed],
            "unchanged": self.unchanged,
            "reordered": self.reordered,
        }


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def _summary(item: EvalItem) -> dict:
    return {"id": item.id, "query": item.query, "source": item.source, "tags": list(item.tags)}


def diff_evalsets(old: EvalSet, new: EvalSet) -> EvalSetDiff:
    """Items added, removed and changed from ``old`` to ``new`` (see the module docstring)."""
    old_items = {item.id: item for item in old}
    new_items = {item.id: item for item in new}
    result = EvalSetDiff(old.fingerprint(), new.fingerprint(), len(old), len(new))
    result.added = [item for item in new if item.id not in old_items]
    result.removed = [item for item in old if item.id not in new_items]
    for item in new:
        before = old_items.get(item.id)
        if before is None:
            continue
        fields = {name: (getattr(before, name), getattr(item, name)) for name in COMPARED_FIELDS
                  if getattr(before, name) != getattr(item, name)}
        if fields:
            result.changed.append(Change(item.id, fields))
        else:
            result.unchanged += 1
    common_old = [item.id for item in old if item.id in new_items]
    result.reordered = common_old != [item.id for item in new if item.id in old_items]
    return result


def _span_text(e) -> str:
    return f"{e.doc_id}[{e.start}:{e.end}]" if e.is_span else f"{e.doc_id} (whole)"


def _judgement(grade: int) -> str:
    return "judged not relevant" if grade == 0 else f"relevant grade {grade}"


def _evidence_text(old: tuple, new: tuple) -> str:
    """The evidence change span by span with grades: ``+`` a span NEW adds, ``-`` one it drops, and
    grade changes, so a new judged negative (grade 0) never reads as new gold evidence."""
    before = {(e.doc_id, e.start, e.end): e for e in old}
    after = {(e.doc_id, e.start, e.end): e for e in new}
    parts = [f"+{_span_text(e)} {_judgement(e.grade)}" for key, e in after.items() if key not in before]
    parts += [f"-{_span_text(e)} {_judgement(e.grade)}" for key, e in before.items() if key not in after]
    parts += [f"{_span_text(e)} grade {before[key].grade} -> {e.grade}" for key, e in after.items()
              if key in before and before[key].grade != e.grade]
    return "evidence " + ("; ".join(parts) if parts else "reordered")


def _field_text(name: str, old: object, new: object) -> str:
    if name == "evidence":
        return _evidence_text(old, new)
    if name == "tags":
        gone, came = [t for t in old if t not in new], [t for t in new if t not in old]
        return "tags " + " ".join([*(f"-{t}" for t in gone), *(f"+{t}" for t in came)] or ["reordered"])
    return f"{name} {_short(old)} -> {_short(new)}"


def _short(value: object, limit: int = 70) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_text(diff: EvalSetDiff, old_name: str, new_name: str) -> str:
    """The report ``ragexp evalset diff`` prints."""
    lines = [f"OLD {old_name}: {diff.old_size} items, fingerprint {diff.old_fingerprint[:12]}",
             f"NEW {new_name}: {diff.new_size} items, fingerprint {diff.new_fingerprint[:12]}"]
    for title, items in (("added", diff.added), ("removed", diff.removed)):
        lines.append(f"{title}: {len(items)}")
        lines += [f"  {item.id} [{item.source or 'source not recorded'}] {_short(item.query)}" for item in items]
    lines.append(f"changed: {len(diff.changed)}")
    for change in diff.changed:
        lines.append(f"  {change.id}: " + "; ".join(_field_text(name, old, new) for name, (old, new) in change.fields.items()))
    lines.append(f"unchanged: {diff.unchanged}")
    if diff.reordered:
        lines.append("order: the items common to both are in a different order (the fingerprint hashes them in file order)")
    if diff.comparable:
        lines.append("comparable: yes, the fingerprints are equal (same MLflow experiment; compare and gate rank runs on both)")
    else:
        lines.append("comparable: no, the fingerprints differ: runs on OLD and NEW land in different MLflow experiments and "
                     "ragexp compare / ragexp gate will not rank them against each other; re-run the baseline on NEW")
    return "\n".join(lines)
