"""The per-run recall@k SVG: well-formed, one curve per fully known metric, points where the values are."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ragexp.tracking.recall_plot import BOTTOM, HEIGHT, TOP, recall_curve_svg

SVG = "{http://www.w3.org/2000/svg}"


def curves(svg: str) -> dict[str, list[tuple[float, float]]]:
    root = ET.fromstring(svg)
    return {line.get("data-metric"): [tuple(map(float, p.split(","))) for p in line.get("points").split()]
            for line in root.iter(f"{SVG}polyline")}


def test_each_fully_known_metric_is_one_curve_with_its_values_on_the_0_1_scale():
    aggregates = {"hit_rate_at_1": 0.5, "hit_rate_at_5": 1.0, "recall_at_1": 0.25, "recall_at_5": 0.0,
                  "doc_recall_at_5": 0.9}  # doc_recall lacks k=1: not drawn
    drawn = curves(recall_curve_svg(aggregates, [1, 5], "run <a & b>"))
    assert set(drawn) == {"hit_rate", "recall"}
    plot_h = HEIGHT - TOP - BOTTOM
    for name, points in drawn.items():
        values = [(TOP + plot_h - y) / plot_h for _, y in points]
        assert all(abs(v - aggregates[f"{name}_at_{k}"]) < 0.01 for v, k in zip(values, (1, 5), strict=True))
        assert points[0][0] < points[1][0]  # k grows to the right


def test_the_title_is_escaped_and_no_ks_draws_no_curve():
    svg = recall_curve_svg({}, [], "a < b & c")
    assert "a &lt; b &amp; c" in svg and curves(svg) == {}
