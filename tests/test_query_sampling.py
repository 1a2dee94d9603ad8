"""Near-duplicate merging, the threshold's choice on labelled pairs, and the stratified sample."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from ragexp.candidates.from_logs import _embedded_subset
from ragexp.candidates.near_duplicates import (
    PAIRS_FILE,
    fit_threshold,
    merge_near_duplicates,
)
from ragexp.candidates.stratify import _allocate, stratified_sample


def _unit(*rows):
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_near_duplicates_join_the_most_similar_kept_query_most_frequent_first():
    # b is within the threshold of a; c is close to b but not to a: leader clustering keeps c.
    a, b, c, d = [1, 0, 0], [0.98, 0.2, 0], [0.9, 0.43, 0], [0, 0, 1]
    vectors = _unit(b, a, c, d)
    counts = np.array([2, 10, 1, 5])
    sims = vectors @ vectors.T
    assert sims[0, 1] > 0.97 and sims[1, 2] < 0.95 and sims[0, 2] > 0.97
    leader = merge_near_duplicates(vectors, counts, threshold=0.97)
    # a (count 10) is kept first, b joins it; c is compared with kept queries only (a): below 0.97, kept.
    assert leader.tolist() == [1, 1, 2, 3]


def test_near_duplicate_merging_across_blocks_matches_a_single_block(monkeypatch):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 16))
    vectors = np.vstack([base, base + rng.normal(scale=0.05, size=base.shape)]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    counts = rng.integers(1, 50, size=len(vectors))
    whole = merge_near_duplicates(vectors, counts, 0.95)
    import ragexp.candidates.near_duplicates as module

    monkeypatch.setattr(module, "BLOCK", 7)
    assert merge_near_duplicates(vectors, counts, 0.95).tolist() == whole.tolist()
    assert 0 < int((whole != np.arange(len(whole))).sum()) <= 40


def test_the_threshold_is_chosen_on_one_half_of_the_pairs_and_reported_on_the_other(tmp_path):
    """Hand computation: pairs with known cosines; even rows fit, odd rows report."""
    rows = [("same", 0.99), ("same", 0.97), ("different", 0.90), ("different", 0.80), ("same", 0.93), ("same", 0.92),
            ("different", 0.85), ("different", 0.95)]  # fmt: skip
    pairs = tmp_path / "pairs.csv"
    with pairs.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["label", "a", "b"])
        writer.writerows([label, f"a{i}", f"b{i}"] for i, (label, _) in enumerate(rows))
    cosine = {f"b{i}": value for i, (_, value) in enumerate(rows)}

    def encode(texts):  # a_i = e1, b_i at angle acos(cosine_i) from e1
        out = []
        for text in texts:
            c = cosine.get(text, 1.0)
            out.append([c, np.sqrt(1 - c * c)])
        return np.array(out)

    chosen = fit_threshold(encode, "fake", pairs)
    # Fit half (rows 0, 2, 4, 6): different pairs at 0.90 and 0.85; at most 5% may merge -> lowest t above 0.90.
    assert chosen.value == pytest.approx(0.905)
    # Other half (1, 3, 5, 7): different 0.80, 0.95 -> 1 of 2 merged; same 0.97, 0.92 -> 2 of 2.
    assert "merges 50% of those and 100% of pairs asking the same question" in chosen.how
    assert "not on this log" in chosen.how


def test_the_shipped_pairs_file_is_balanced_and_labelled():
    with PAIRS_FILE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    labels = [row["label"] for row in rows]
    assert set(labels) == {"same", "different"}
    assert labels.count("same") >= 50 and labels.count("different") >= 50
    assert all(row["a"].strip() and row["b"].strip() and row["a"] != row["b"] for row in rows)


def test_allocation_gives_every_cluster_one_slot_and_the_rest_by_traffic():
    traffic = np.array([100.0, 30.0, 10.0, 1.0])
    sizes = np.array([50, 50, 50, 1])
    given = _allocate(traffic, sizes, 10)
    assert given.sum() == 10 and (given >= 1).all()
    # 6 extra slots by largest remainder of 6 * traffic over the open clusters (the 4th is full): 100/140*6=4.29, 30/140*6=1.29, 10/140*6=0.43
    assert given.tolist() == [5, 2, 2, 1]


def test_allocation_never_exceeds_a_cluster_and_redistributes():
    given = _allocate(np.array([100.0, 1.0, 1.0]), np.array([2, 10, 10]), 12)
    assert given.tolist()[0] == 2 and given.sum() == 12 and (given <= [2, 10, 10]).all()


def test_stratified_sample_covers_rare_topics_and_favours_frequent_ones():
    rng = np.random.default_rng(1)
    centres = np.eye(8, 32)
    vectors, frequency = [], []
    for topic in range(8):
        members = 30 if topic == 0 else 5
        for _ in range(members):
            vectors.append(centres[topic] + rng.normal(scale=0.05, size=32))
            frequency.append(100 if topic == 0 else 1)
    vectors = np.array(vectors, dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    frequency = np.array(frequency)
    topic_of = np.repeat(np.arange(8), [30, 5, 5, 5, 5, 5, 5, 5])
    sample = stratified_sample(vectors, frequency, 16, seed=0)
    picked_topics = topic_of[sample.picked]
    assert len(sample.picked) == len(set(sample.picked)) == 16
    assert sample.k == 8
    assert set(picked_topics) == set(range(8))  # every topic, the rare ones too
    assert (picked_topics == 0).sum() == 9  # the frequent topic gets the traffic share of the 8 extra slots
    assert stratified_sample(vectors, frequency, 16, seed=0).picked == sample.picked
    assert sample.cluster[sample.picked[0]] == 0  # clusters numbered by traffic


def test_stratified_sample_of_more_than_there_is_returns_everything():
    vectors = np.eye(3, dtype=np.float32)
    sample = stratified_sample(vectors, np.array([3, 2, 1]), 10)
    assert sorted(sample.picked) == [0, 1, 2]


def test_the_embedding_cap_keeps_the_most_frequent_half_and_a_draw_of_the_tail():
    counts = np.array([1] * 90 + [50] * 10)
    subset = _embedded_subset(counts, 20, seed=0)
    assert len(subset) == 20 and list(subset) == sorted(subset)
    assert set(range(90, 100)) <= set(subset.tolist())
    assert _embedded_subset(counts, 200, seed=0).tolist() == list(range(100))
