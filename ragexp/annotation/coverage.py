"""The coverage panel: what the eval set covers so far, against the method article's advice.

- ``progress``: items in the eval set against the article's 50-150 questions.
- ``categories``: items per failure-prone category (:data:`ragexp.data.lint.FAILURE_PRONE_CATEGORIES`,
  tags compared as lint compares them; unanswerable items count as ``unanswerable``), each with
  the share lint asks for (:data:`ragexp.data.lint.MIN_CATEGORY_SHARE` of the items, at least one).
- ``documents`` / ``sections``: the documents, and the sections (chunks of the default chunker
  grouped by their heading path), that no item's positive evidence touches.
"""

from __future__ import annotations

import math

from ragexp.annotation.hints import ChunkMap
from ragexp.data.lint import FAILURE_PRONE_CATEGORIES, MIN_CATEGORY_SHARE, category_key
from ragexp.datamodel import is_relevant

ADVISED_MIN, ADVISED_MAX = 50, 150
LISTED = 25


def coverage(items: list[dict], chunk_map: ChunkMap) -> dict:
    n = len(items)
    wanted = max(1, math.ceil(MIN_CATEGORY_SHARE * max(n, ADVISED_MIN)))
    counts = dict.fromkeys(FAILURE_PRONE_CATEGORIES, 0)
    keys = {category_key(c): c for c in FAILURE_PRONE_CATEGORIES}
    touched_docs: set[str] = set()
    touched_sections: set[tuple[str, str]] = set()
    for item in items:
        found = {keys[category_key(t)] for t in item.get("tags", []) if category_key(t) in keys}
        if item.get("answerable", True) is False:
            found.add("unanswerable")
        for category in found:
            counts[category] += 1
        for e in item.get("evidence", []):
            if not is_relevant(e.get("grade", 1)):
                continue
            touched_docs.add(e["doc_id"])
            if e.get("start") is None:
                touched_sections.update((e["doc_id"], c.title) for c in chunk_map.by_doc.get(e["doc_id"], []))
            else:
                touched_sections.update((e["doc_id"], c.title) for c in chunk_map.overlapping(e["doc_id"], e["start"], e["end"]))
    sections = list(dict.fromkeys((c.doc_id, c.title) for chunks in chunk_map.by_doc.values() for c in chunks))
    open_docs = [doc_id for doc_id in chunk_map.corpus if doc_id not in touched_docs]
    open_sections = [s for s in sections if s not in touched_sections]
    return {
        "progress": {"items": n, "advised_min": ADVISED_MIN, "advised_max": ADVISED_MAX},
        "categories": [{"name": c, "items": counts[c], "wanted": wanted, "ok": counts[c] >= wanted}
                       for c in FAILURE_PRONE_CATEGORIES],
        "documents": {"total": len(chunk_map.corpus), "without_question": len(open_docs), "first": open_docs[:LISTED]},
        "sections": {"total": len(sections), "without_question": len(open_sections),
                     "first": [{"doc_id": d, "title": t} for d, t in open_sections[:LISTED]]},
    }
