"""Per-group means: the eval set's tags (``synonym``, ``boundary`` ...) and its items' sources
(``log``, ``hand``, ``draft``, ``failure``) split every metric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from ragexp.metrics.measure import SOURCE, TAG, grouped

#: The group of items whose ``source`` was not recorded, when other items record theirs.
UNRECORDED_SOURCE = "unrecorded"


def _group_means(kind: str, per_query: Mapping[str, Mapping[str, float]], groups_by_query: Mapping[str, Sequence[str]]) -> dict[str, float]:
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    for qid, metrics in per_query.items():
        for group in groups_by_query.get(qid, ()):
            for name, value in metrics.items():
                sums[(group, name)].append(value)
    return {grouped(kind, group, name): sum(v) / len(v) for (group, name), v in sorted(sums.items())}


def per_tag_means(per_query: Mapping[str, Mapping[str, float]], tags_by_query: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``tag.<tag>.<metric>``: the metric's mean over the queries carrying ``tag``."""
    return _group_means(TAG, per_query, tags_by_query)


def sources_by_query(items: Sequence) -> dict[str, tuple[str, ...]]:
    """Each item's source as a one-element group; items without one are :data:`UNRECORDED_SOURCE`.
    Empty when no item records a source (an eval set from before sources existed)."""
    if all(item.source is None for item in items):
        return {}
    return {item.id: (item.source or UNRECORDED_SOURCE,) for item in items}


def per_source_means(per_query: Mapping[str, Mapping[str, float]], items: Sequence) -> dict[str, float]:
    """``source.<source>.<metric>``: the metric's mean over the items from ``source``
    (:func:`sources_by_query`), so drafted and real questions are never averaged unseen."""
    return _group_means(SOURCE, per_query, sources_by_query(items))
