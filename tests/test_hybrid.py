"""Hybrid fusion maths on hand-made rankings, the weight knob, and the retriever wrapper."""

from __future__ import annotations

import math

import pytest

from ragexp.datamodel import Chunk
from ragexp.errors import RagexpInputError
from ragexp.runtime.stage_cache import StageCache
from reference_pipelines.hybrid import HybridRetriever, rrf_fuse, weighted_fuse

A = [("a", 10.0), ("b", 5.0), ("c", 0.0)]
B = [("c", 0.9), ("d", 0.3)]


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = rrf_fuse([[("a", 9), ("b", 8), ("c", 7)], [("c", 3), ("a", 2), ("d", 1)]], rrf_k=60)
    assert [cid for cid, _ in fused] == ["a", "c", "b", "d"]
    assert [s for _, s in fused] == pytest.approx([1 / 61 + 1 / 62, 1 / 61 + 1 / 63, 1 / 62, 1 / 63])


def test_rrf_ties_are_broken_by_id_descending() -> None:
    fused = rrf_fuse([[("x", 1.0), ("y", 0.5)], [("y", 7.0), ("x", 2.0)]], rrf_k=0)
    assert fused == [("y", 1.5), ("x", 1.5)]


def test_weighted_minmax_missing_candidates_get_zero() -> None:
    fused = weighted_fuse([A, B], weights=[0.75, 0.25], normalization="minmax")
    assert fused == [("a", pytest.approx(0.75)), ("b", pytest.approx(0.375)), ("c", pytest.approx(0.25)), ("d", 0.0)]


def test_weighted_zscore_missing_candidates_get_the_lists_minimum() -> None:
    fused = dict(weighted_fuse([A, B], weights=[1, 1], normalization="zscore"))
    z = 5 / math.sqrt(50 / 3)  # A = (10, 5, 0): mean 5, population std sqrt(50/3)
    assert fused["a"] == pytest.approx(0.5 * z + 0.5 * -1)  # a is missing from B: B's minimum z, -1
    assert fused["b"] == pytest.approx(0.5 * 0 + 0.5 * -1)
    assert fused["c"] == pytest.approx(0.5 * -z + 0.5 * 1)
    assert fused["d"] == pytest.approx(0.5 * -z + 0.5 * -1)


def test_constant_lists_normalise_without_dividing_by_zero() -> None:
    flat = [("p", 2.0), ("q", 2.0)]
    assert weighted_fuse([flat, [("q", 1.0)]], [0.5, 0.5], "minmax") == [("q", 1.0), ("p", 0.5)]
    assert weighted_fuse([flat, [("q", 1.0)]], [0.5, 0.5], "zscore") == [("q", 0.0), ("p", 0.0)]


class FixedRetriever:
    """Returns the same ranking for every query, records how it was called."""

    def __init__(self, ranking) -> None:
        self.ranking = ranking
        self.cache = None
        self.indexed = None
        self.asked_k = None

    def index(self, chunks) -> None:
        self.indexed = list(chunks)

    def search(self, queries, k):
        self.asked_k = k
        return [self.ranking[:k] for _ in queries]


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 1.0])
def test_weight_knob_is_a_convex_combination(weight: float) -> None:
    hybrid = HybridRetriever([FixedRetriever(A), FixedRetriever(B)], fusion="weighted", weight=weight)
    (ranking,) = hybrid.search(["q"], k=4)
    assert ranking == weighted_fuse([A, B], [weight, 1 - weight])
    if weight == 1.0:
        assert ranking[:2] == [("a", 1.0), ("b", 0.5)] and {cid for cid, _ in ranking[2:]} == {"c", "d"}
    if weight == 0.0:
        assert [cid for cid, _ in ranking][0] == "c"
    assert HybridRetriever([FixedRetriever(A), FixedRetriever(B)], fusion="weighted", weights=[3 * weight, 3 - 3 * weight]).search(["q"], 4) == [ranking]


def test_wrapper_indexes_every_retriever_searches_at_the_requested_depth_and_shares_its_cache(tmp_path) -> None:
    first, second = FixedRetriever(A), FixedRetriever(B)
    cache = StageCache(tmp_path)
    hybrid = HybridRetriever([first, second], fusion="rrf", cache=cache)
    chunks = [Chunk(cid, cid, 0, 0, 1, "x") for cid in "abcd"]
    hybrid.index(chunks)
    assert first.indexed == second.indexed == chunks and first.cache is cache
    corpus_order = {cid: row for row, cid in enumerate("abcd")}
    assert hybrid.search(["q1", "q2"], k=2) == [rrf_fuse([A[:2], B[:2]], position=corpus_order)[:2]] * 2
    assert first.asked_k == 2  # one retrieval depth: the runner's, no depth of the hybrid's own
    hybrid.search(["q"], k=80)
    assert second.asked_k == 80


def test_components_take_the_parameters_their_constructors_accept() -> None:
    hybrid = HybridRetriever(components=["bm25", "dense"], k1=0.9, b=0.4, tokenizer={"name": "plain", "stemmer": None},
                             encoder={"model": "minilm"}, index="hnsw", fusion="rrf")
    bm25, dense = hybrid.retrievers
    assert (bm25.k1, bm25.b, bm25.tokenizer.config["stemmer"], dense.index_type) == (0.9, 0.4, None, "hnsw")
    assert bm25.ties == dense.ties == "corpus"
    with pytest.raises(RagexpInputError) as err:
        HybridRetriever(components=["bm25", "dense"], k1=0.9, kk1=2)
    assert err.value.field == "kk1"
    with pytest.raises(RagexpInputError) as err:
        HybridRetriever(components=["bm25", "splade"])
    assert err.value.field == "components"


def test_sub_retrievers_can_be_configs() -> None:
    hybrid = HybridRetriever(
        [{"_target_": "reference_pipelines.bm25.BM25Retriever"}, {"_target_": "reference_pipelines.bm25.BM25Retriever", "variant": "bm25plus"}]
    )
    assert [r.variant for r in hybrid.retrievers] == ["okapi", "bm25plus"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"fusion": "borda"}, "fusion"),
        ({"normalization": "rank"}, "normalization"),
        ({"weights": [1.0]}, "weights"),
        ({"weights": [-1.0, 2.0]}, "weights"),
        ({"weight": 0.3, "weights": [0.3, 0.7]}, "weight"),
        ({"weight": 1.5}, "weight"),
        ({"rrf_k": -1}, "rrf_k"),
        ({"depth": 100}, "depth"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(RagexpInputError) as err:
        HybridRetriever([FixedRetriever(A), FixedRetriever(B)], **kwargs)
    assert err.value.field == field
