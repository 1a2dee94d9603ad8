"""A run's hit rate@k and recall@k against k, as a small SVG the MLflow artifact view shows.

Written as text rather than drawn with matplotlib: it is logged with every run of a sweep, and
importing and laying out a matplotlib figure per run would cost more than the run's own logging.
x is k on an evenly spaced axis (one tick per k of the
run), y is the metric on a fixed 0..1 scale, so two runs' pictures compare by eye.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from ragexp.metrics.measure import at

#: The curves drawn, in order, with their colours (the first three of matplotlib's default cycle).
CURVES = (("hit_rate", "#1f77b4"), ("recall", "#ff7f0e"), ("doc_recall", "#2ca02c"))
WIDTH, HEIGHT = 420, 280
LEFT, RIGHT, TOP, BOTTOM = 48, 110, 30, 40


def recall_curve_svg(aggregates: Mapping[str, float], ks: Sequence[int], title: str) -> str:
    """The SVG text: one polyline with point markers per curve of :data:`CURVES` whose value
    ``<name>_at_<k>`` is known for every k in ``ks``; a legend names the curves drawn."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (plot_w * i / (len(ks) - 1) if len(ks) > 1 else plot_w / 2)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - min(max(value, 0.0), 1.0))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="10">{escape(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for i, k in enumerate(ks):
        parts.append(f'<text x="{x(i):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">k</text>')
    drawn = 0
    for name, colour in CURVES:
        values = [aggregates.get(at(name, k)) for k in ks]
        if not ks or any(v is None for v in values):
            continue
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline class="curve" data-metric="{name}" points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>' for i, v in enumerate(values)]
        legend_y = TOP + 14 * drawn + 8
        parts.append(f'<line x1="{WIDTH - RIGHT + 10}" x2="{WIDTH - RIGHT + 28}" y1="{legend_y}" y2="{legend_y}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{WIDTH - RIGHT + 32}" y="{legend_y + 4}">{name}@k</text>')
        drawn += 1
    parts.append("</svg>")
    return "\n".join(parts)
