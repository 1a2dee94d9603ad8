"""Per-category means: the eval set's tags (``synonym``, ``boundary`` ...) split every metric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence


def per_tag_means(per_query: Mapping[str, Mapping[str, float]], tags_by_query: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``tag.<tag>.<metric>``: the metric's mean over the queries carrying ``tag``."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    for qid, metrics in per_query.items():
        for tag in tags_by_query.get(qid, ()):
            for name, value in metrics.items():
                sums[(tag, name)].append(value)
    return {f"tag.{tag}.{name}": sum(v) / len(v) for (tag, name), v in sorted(sums.items())}
