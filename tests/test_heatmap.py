"""The summary heatmap drawn with Pillow: colour scale and bar, blank cells, best and tied cells, CI
half-widths, panel layout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from ragexp.tracking.heatmap import (
    BLANK,
    CELL_H,
    CELL_W,
    NOISE_SPAN,
    VIRIDIS,
    Panel,
    anchored_scale,
    draw_heatmap,
    viridis,
)


def test_viridis_scale_ends_and_clamps():
    assert viridis(0.0) == VIRIDIS[0]
    assert viridis(1.0) == VIRIDIS[-1]
    assert viridis(-3) == VIRIDIS[0] and viridis(7) == VIRIDIS[-1]
    assert viridis(0.5) == VIRIDIS[8]
    between = viridis(1 / 32)  # halfway between the first two stops
    assert all(min(a, b) <= c <= max(a, b) for a, b, c in zip(VIRIDIS[0], VIRIDIS[1], between))


def _find_colour(image: Image.Image, colour: tuple[int, int, int]) -> int:
    """How many pixels of ``image`` have exactly ``colour``."""
    return int(np.all(np.asarray(image) == colour, axis=-1).sum())


def test_cells_coloured_by_value_best_outlined_nan_blank(tmp_path):
    grid = [[0.2, 0.6], [math.nan, 1.0]]
    path = draw_heatmap(tmp_path / "h.png", "hit_rate_at_5", ["fixed", "markdown"], ["bm25", "dense"], "chunking",
                        "retrieval", [Panel("", grid)], low=0.2, high=1.0, best=1.0)
    image = Image.open(path).convert("RGB")
    # low value -> darkest end, high value -> brightest end, missing -> blank; each fills most of a cell
    for colour in (VIRIDIS[0], VIRIDIS[-1], viridis(0.5), BLANK):
        assert _find_colour(image, colour) > CELL_W * CELL_H // 2, colour
    # the best cell is outlined (2 px) in the text colour of the bright half (black)
    plain = draw_heatmap(tmp_path / "plain.png", "hit_rate_at_5", ["fixed", "markdown"], ["bm25", "dense"], "chunking",
                         "retrieval", [Panel("", grid)], low=0.2, high=1.0, best=None)
    added = _find_colour(image, (0, 0, 0)) - _find_colour(Image.open(plain).convert("RGB"), (0, 0, 0))
    assert added >= 2 * 2 * (CELL_W + CELL_H) - 16


def test_one_panel_per_facet_and_constant_value_scale(tmp_path):
    one = draw_heatmap(tmp_path / "one.png", "mrr", ["a", "b"], ["x"], "chunking", "retrieval",
                       [Panel("reranker=none", [[0.5], [0.5]])], low=0.5, high=0.5, best=0.5)
    three = draw_heatmap(tmp_path / "three.png", "mrr", ["a", "b"], ["x"], "chunking", "retrieval",
                         [Panel(f"reranker={r}\nk=5", [[0.1], [0.9]]) for r in "abc"], low=0.1, high=0.9, best=0.9)
    w1, _ = Image.open(one).size
    w3, _ = Image.open(three).size
    assert w3 - w1 > 2 * CELL_W  # two more panels; the colour bar is drawn once
    # a metric equal in every cell (high == low) draws every cell at the dark end, no division by zero
    assert _find_colour(Image.open(one).convert("RGB"), VIRIDIS[0]) > CELL_W * CELL_H


def test_scale_is_anchored_to_the_noise_not_to_the_values():
    # 0.621 vs 0.635 inside a noise of 0.07: the scale spans 4 x 0.07 about their centre
    low, high = anchored_scale([0.621, 0.635], noise=0.07)
    assert high - low == pytest.approx(NOISE_SPAN * 0.07) and (low + high) / 2 == pytest.approx(0.628)
    assert (0.635 - 0.621) / (high - low) < 0.06  # a sliver of the colour bar, not dark vs bright
    # values further apart than the noise keep their own range; the scale never leaves [0, 1]
    assert anchored_scale([0.2, 0.9], noise=0.05) == pytest.approx((0.2, 0.9))
    assert anchored_scale([0.97, 0.99], noise=0.1) == pytest.approx((0.6, 1.0))
    assert anchored_scale([], noise=None) == (0.0, 1.0)


def test_colour_bar_tied_cells_and_half_widths_are_drawn(tmp_path):
    grid = [[0.5, 0.6], [0.7, 0.8]]
    args = ("ndcg_at_5", ["a", "b"], ["x", "y"], "chunking", "retrieval")
    plain = Image.open(draw_heatmap(tmp_path / "p.png", *args, [Panel("", grid)], low=0.0, high=1.0, best=0.8)).convert("RGB")
    marked = Image.open(draw_heatmap(
        tmp_path / "m.png", *args, [Panel("", grid, half_widths=[[0.05] * 2] * 2, tied=[[False, False], [True, False]])],
        low=0.0, high=1.0, best=0.8, noise=0.07)).convert("RGB")
    assert plain.size == marked.size
    # the colour bar holds both ends of the scale
    assert all(_find_colour(plain, colour) >= 1 for colour in (VIRIDIS[0], VIRIDIS[-1]))
    # the tied cell (0.7, white text on the dark half) gets a dashed outline: white dashes on its colour
    cell = viridis(0.7)
    assert _find_colour(marked, cell) < _find_colour(plain, cell) - 2 * (CELL_W + CELL_H)
    # the half-width line adds text to every cell
    assert np.any(np.asarray(plain) != np.asarray(marked), axis=-1).sum() > 4 * 50
