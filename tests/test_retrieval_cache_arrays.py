"""Rankings through the stage cache's arrays come back exactly: the same ids (any text, a NUL or a
lone surrogate included), the same float64 scores, in trec_eval's order, on a miss and on a hit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragexp.evaluation.retrieval_step import _from_arrays, _split, _to_arrays
from ragexp.metrics.ranking import trec_order
from ragexp.runtime.stage_cache import StageCache

_IDS = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_SCORES = st.floats(allow_nan=False, width=64)
_RANKINGS = st.lists(st.lists(st.tuples(_IDS, _SCORES), max_size=6), max_size=5)


@given(_RANKINGS, st.lists(st.text(max_size=20), max_size=3))
@settings(max_examples=300, deadline=None)
def test_rankings_round_trip_through_the_arrays(rankings, warnings):
    arrays = _to_arrays(rankings, warnings)
    back = _from_arrays(arrays)
    assert back == [trec_order(ranking) for ranking in rankings]
    assert all(type(cid) is str and type(score) is float for ranking in back for cid, score in ranking)
    assert _split(arrays, "warnings") == warnings


def test_a_miss_and_a_hit_give_the_same_rankings(tmp_path):
    """The value two ways: computed (miss) and read back in a fresh cache object (hit)."""
    rankings = [[("doc\x00", 0.5), ("dóc#chunk_1", 0.1 + 0.2), ("\ud800", -math.pi)], [], [("a", 1e-310)]]
    cache = StageCache(tmp_path)
    first = _from_arrays(cache.get_or_compute_arrays("retrieval", {"k": 1}, lambda: _to_arrays(rankings, ["w"])))
    later = StageCache(tmp_path)
    second = _from_arrays(later.get_or_compute_arrays("retrieval", {"k": 1}, lambda: {"never": np.zeros(1)}))
    assert later.hits["retrieval"] == 1 and cache.misses["retrieval"] == 1
    assert first == second == [trec_order(r) for r in rankings]
    assert second[0][0] == ("doc\x00", 0.5)  # numpy's str arrays would drop the trailing NUL
