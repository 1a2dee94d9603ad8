"""Two annotators' eval sets of the same ten questions on the tiny corpus, crafted so that every
kind of (dis)agreement occurs once; the truth counted by hand is in tests/test_evalset_agreement.py."""

from __future__ import annotations

import json
from pathlib import Path


def ev(doc_id, start=None, end=None, grade=1) -> dict:
    out = {"doc_id": doc_id} | ({"start": start, "end": end} if start is not None else {})
    return out | ({"grade": grade} if grade != 1 else {})


def item(item_id, evidence, answerable=True) -> dict:
    return {"id": item_id, "query": f"question {item_id}?", "evidence": evidence} | ({} if answerable else {"answerable": False})


#: The crafted pair: what each annotator judged, item by item (comments: the truth counted by hand).
ALICE = [
    item("i1", [ev("webhooks", 0, 40)]),                             # overlap [20, 40): F1 2*20/80 = 0.5
    item("i2", [ev("keys", 10, 30)]),                                # identical: F1 1
    item("i3", [ev("keys", 25, 62)]),                                # bob: unanswerable, keys not relevant
    item("i4", [ev("limits", grade=0)], answerable=False),           # both: limits not relevant
    item("i5", [ev("limits", 0, 30), ev("refunds", grade=0)]),       # refunds: alice no, bob yes
    item("i6", [ev("refunds")]),                                     # whole document vs [0, 10)
    item("i7", [], answerable=False),                                # both: nothing
    item("i8", [ev("webhooks", 0, 10)]),                             # bob: other document; each judged by one
    item("i9", [ev("webhooks", 5, 15, grade=2)]),                    # bob grade 1: relevant both
    item("i10", [], answerable=False),                               # bob: answerable
]
BOB = [
    item("i1", [ev("webhooks", 20, 60)]),
    item("i2", [ev("keys", 10, 30)]),
    item("i3", [ev("keys", 25, 62, grade=0)], answerable=False),
    item("i4", [ev("limits", grade=0)], answerable=False),
    item("i5", [ev("limits", 0, 30), ev("refunds", 0, 20)]),
    item("i6", [ev("refunds", 0, 10)]),
    item("i7", [], answerable=False),
    item("i8", [ev("keys", 0, 10)]),
    item("i9", [ev("webhooks", 5, 15)]),
    item("i10", [ev("webhooks", 0, 10)]),
]  # fmt: skip


def write(path: Path, items: list[dict]) -> str:
    """An eval set named ``support`` holding ``items``; returns its path."""
    path.write_text("\n".join(json.dumps(x) for x in [{"ragexp_evalset": 1, "name": "support"}, *items]) + "\n")
    return str(path)
