"""Near-duplicate queries merged by embedding cosine, and the threshold that decides it.

:func:`merge_near_duplicates` walks the queries most frequent first; a query whose cosine to an
earlier kept query is at least ``threshold`` joins the most similar such query (its count is added
there and it is listed as a variant), otherwise it is kept. Comparing only to kept queries
(leader clustering) means a chain ``a ~ b ~ c`` never merges ``a`` and ``c`` unless they are
themselves similar enough.

:func:`fit_threshold` chooses the threshold on hand-labelled question pairs shipped with ragexp
(``ragexp/resources/near_duplicate_pairs.csv``: ``same`` = one question worded twice, ``different`` = close wording,
different question), never on the log being imported. The pairs are split into halves (even and odd
rows); the threshold is the lowest on a 0.005 grid that merges at most :data:`MAX_FALSE_MERGE` of the
``different`` pairs of the first half (merging two different questions hides one of them from the
annotator; keeping a paraphrase twice only costs a second look); the share of ``different`` and
``same`` pairs it merges on the other half is reported with it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAIRS_FILE = Path(__file__).parents[1] / "resources" / "near_duplicate_pairs.csv"
GRID = np.round(np.arange(0.80, 1.0001, 0.005), 3)
MAX_FALSE_MERGE = 0.05
BLOCK = 1024


@dataclass(frozen=True)
class Threshold:
    value: float
    how: str  # one line: how it was chosen


def _merged_share(similarity: np.ndarray, threshold: float) -> float:
    return float((similarity >= threshold).mean()) if len(similarity) else 0.0


def fit_threshold(encode, model_name: str, pairs_file: Path = PAIRS_FILE) -> Threshold:
    """The threshold chosen on the even rows of ``pairs_file``, reported on the odd rows."""
    with pairs_file.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    similarity = (encode([row["a"] for row in rows]) * encode([row["b"] for row in rows])).sum(axis=1)
    same = np.array([row["label"] == "same" for row in rows])
    fit = np.arange(len(rows)) % 2 == 0
    value = next(float(t) for t in GRID if _merged_share(similarity[fit & ~same], t) <= MAX_FALSE_MERGE)
    false_merges = _merged_share(similarity[~fit & ~same], value)
    recall = _merged_share(similarity[~fit & same], value)
    how = (
        f"chosen for {model_name} on ragexp's {len(rows)} hand-labelled question pairs, not on this log: the lowest "
        f"merging at most {MAX_FALSE_MERGE:.0%} of close-but-different pairs in one half; in the other half it merges "
        f"{false_merges:.0%} of those and {recall:.0%} of pairs asking the same question"
    )
    return Threshold(value, how)


def merge_near_duplicates(vectors: np.ndarray, counts: np.ndarray, threshold: float) -> np.ndarray:
    """``leader[i]``: the index of the kept query that query ``i`` merges into (``i`` itself when kept).

    ``vectors`` are unit rows, ``counts`` the queries' frequencies; queries are visited by count
    (descending, ties in input order).
    """
    order = np.argsort(-counts, kind="stable")
    leader = np.arange(len(counts))
    kept = np.empty((0, vectors.shape[1]), dtype=np.float32)
    kept_ids: list[int] = []
    for start in range(0, len(order), BLOCK):
        block = order[start : start + BLOCK]
        block_vectors = vectors[block]
        to_kept = block_vectors @ kept.T
        within = block_vectors @ block_vectors.T
        new_rows: list[int] = []  # positions in block kept so far
        for row, query in enumerate(block):
            nearest: list[tuple[float, int]] = []
            if kept_ids:
                column = int(np.argmax(to_kept[row]))
                nearest.append((float(to_kept[row, column]), kept_ids[column]))
            if new_rows:
                similarities = within[row, new_rows]
                column = int(np.argmax(similarities))
                nearest.append((float(similarities[column]), int(block[new_rows[column]])))
            similarity, target = max(nearest, default=(-1.0, -1))
            if similarity >= threshold:
                leader[query] = target
            else:
                new_rows.append(row)
        kept_ids.extend(int(block[row]) for row in new_rows)
        kept = np.vstack([kept, block_vectors[new_rows]])
    return leader
