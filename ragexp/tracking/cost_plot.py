"""Quality against p95 latency as a PNG, drawn with Pillow: one numbered point per config, the
Pareto front joined by its staircase, the configs named in a numbered list beside the chart.

Marks: front a filled blue dot (joined), dominated a hollow grey one, the best config on the
quality metric within budget ringed in gold, the cheapest config tied with it ringed in green,
over budget a red cross (and a dashed red line at a latency budget). Each point carries its
quality CI half-width (vertical whisker) and the spread of its latency repeats (horizontal
whisker), so a reader sees which gaps are inside the noise. The latency axis is logarithmic when
the slowest config is more than 10x the fastest, else linear.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragexp.tracking.heatmap import _fonts, _text_size

WIDTH, HEIGHT = 1000, 520
LEFT, TOP, BOTTOM, PLOT_W = 78, 56, 64, 520
FRONT, DOMINATED, OVER, BEST, CHEAPEST, GRID = (33, 84, 160), (150, 150, 150), (200, 30, 30), (212, 160, 0), (20, 150, 60), (232, 232, 232)
INK, BACKGROUND = (0, 0, 0), (255, 255, 255)


@dataclass(frozen=True)
class PlotPoint:
    label: str
    quality: float
    latency_ms: float
    quality_half: float = 0.0
    latency_spread: float = 0.0
    status: str = "front"  # front | dominated | over_budget
    best: bool = False
    cheapest_tied: bool = False


def _ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        ticks = [m * 10 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1) for m in (1, 2, 5)]
        return [t for t in ticks if low <= t <= high]
    step = 10 ** math.floor(math.log10((high - low) / 4 or 1))
    step *= next(m for m in (1, 2, 5, 10) if (high - low) / (step * m) <= 6)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _label(value: float) -> str:
    return f"{value:g}" if value >= 1 else f"{value:.2g}"


def _mark(draw, x: float, y: float, status: str, best: bool, cheapest: bool) -> None:
    """One config's marker (module docstring)."""
    if best:
        draw.ellipse((x - 11, y - 11, x + 11, y + 11), outline=BEST, width=3)
    if cheapest:
        draw.ellipse((x - 11, y - 11, x + 11, y + 11), outline=CHEAPEST, width=3)
    if status == "over_budget":
        draw.line((x - 5, y - 5, x + 5, y + 5), fill=OVER, width=3)
        draw.line((x - 5, y + 5, x + 5, y - 5), fill=OVER, width=3)
    elif status == "front":
        draw.ellipse((x - 5, y - 5, x + 5, y + 5), fill=FRONT)
    else:
        draw.ellipse((x - 5, y - 5, x + 5, y + 5), outline=DOMINATED, width=2)


def draw_quality_vs_latency(path: Path, points: Sequence[PlotPoint], quality_name: str, latency_name: str,
                            latency_budget: float | None = None, subtitle: str = "") -> Path:
    """Write the chart (module docstring) to ``path``."""
    from PIL import Image, ImageDraw

    small, large = _fonts()
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    lat = [p.latency_ms for p in points] + ([latency_budget] if latency_budget else [])
    lat_low, lat_high = max(min(lat) * 0.8, 1e-3), max(lat) * 1.25
    log = lat_high / lat_low > 10 * 1.25 / 0.8
    quality = [p.quality for p in points]
    bounded = all(0.0 <= q <= 1.0 for q in quality)  # a rate or score in [0, 1]: its CI whiskers stay inside
    q_low = min(q - p.quality_half for q, p in zip(quality, points))
    q_high = max(q + p.quality_half for q, p in zip(quality, points))
    if bounded:
        q_low, q_high = max(q_low, 0.0), min(q_high, 1.0)
    pad = max((q_high - q_low) * 0.08, 0.005)
    q_low, q_high = q_low - pad, q_high + pad
    plot_h = HEIGHT - TOP - BOTTOM

    def x_of(ms: float) -> float:
        ms = min(max(ms, lat_low), lat_high)
        t = (math.log(ms) - math.log(lat_low)) / (math.log(lat_high) - math.log(lat_low)) if log else \
            (ms - lat_low) / (lat_high - lat_low)
        return LEFT + t * PLOT_W

    def y_of(q: float) -> float:
        return TOP + (1 - (q - q_low) / (q_high - q_low)) * plot_h

    draw.text((LEFT, 10), f"{quality_name} against {latency_name}" + (" (log scale)" if log else ""), fill=INK, font=large)
    if subtitle:
        draw.text((LEFT, 32), subtitle, fill=(90, 90, 90), font=small)
    for tick in _ticks(lat_low, lat_high, log):
        x = x_of(tick)
        draw.line((x, TOP, x, TOP + plot_h), fill=GRID)
        w, _ = _text_size(small, _label(tick))
        draw.text((x - w / 2, TOP + plot_h + 6), _label(tick), fill=INK, font=small)
    for tick in _ticks(q_low, q_high, False):
        y = y_of(tick)
        draw.line((LEFT, y, LEFT + PLOT_W, y), fill=GRID)
        text = f"{tick:.3f}".rstrip("0").rstrip(".")
        w, h = _text_size(small, text)
        draw.text((LEFT - w - 6, y - h / 2 - 2), text, fill=INK, font=small)
    draw.rectangle((LEFT, TOP, LEFT + PLOT_W, TOP + plot_h), outline=INK)
    axis = f"{latency_name} (ms)"
    w, _ = _text_size(small, axis)
    draw.text((LEFT + PLOT_W / 2 - w / 2, HEIGHT - 26), axis, fill=INK, font=small)
    label = Image.new("RGB", (_text_size(small, quality_name)[0] + 4, 18), BACKGROUND)
    ImageDraw.Draw(label).text((2, 1), quality_name, fill=INK, font=small)
    rotated = label.rotate(90, expand=True)
    image.paste(rotated, (8, int(TOP + plot_h / 2 - rotated.height / 2)))
    if latency_budget:
        x = x_of(latency_budget)
        for y in range(TOP, TOP + plot_h, 10):
            draw.line((x, y, x, min(y + 5, TOP + plot_h)), fill=OVER, width=2)
        draw.text((x + 4, TOP + 4), f"budget {latency_budget:g} ms", fill=OVER, font=small)
    front = sorted((p for p in points if p.status == "front"), key=lambda p: p.latency_ms)
    for a, b in zip(front, front[1:]):  # the staircase: quality holds until the next, slower, better config
        draw.line((x_of(a.latency_ms), y_of(a.quality), x_of(b.latency_ms), y_of(a.quality)), fill=FRONT, width=2)
        draw.line((x_of(b.latency_ms), y_of(a.quality), x_of(b.latency_ms), y_of(b.quality)), fill=FRONT, width=2)
    for number, p in enumerate(points, start=1):
        x, y = x_of(p.latency_ms), y_of(p.quality)
        if p.quality_half:
            low, high = p.quality - p.quality_half, p.quality + p.quality_half
            if bounded:
                low, high = max(low, 0.0), min(high, 1.0)
            draw.line((x, y_of(low), x, y_of(high)), fill=(190, 190, 190))
        if p.latency_spread:
            draw.line((x_of(p.latency_ms - p.latency_spread / 2), y, x_of(p.latency_ms + p.latency_spread / 2), y),
                      fill=(190, 190, 190))
    for number, p in enumerate(points, start=1):
        x, y = x_of(p.latency_ms), y_of(p.quality)
        _mark(draw, x, y, p.status, p.best, p.cheapest_tied)
        draw.text((x + 7, y - 16), str(number), fill=INK, font=small)
    legend_x, y = LEFT + PLOT_W + 24, TOP
    for status, best, cheapest, text in (("front", False, False, "Pareto front (joined)"), ("dominated", False, False, "dominated"),
                                         ("over_budget", False, False, "over budget"),
                                         ("front", True, False, "best (within budget)"),
                                         ("front", False, True, "cheapest config tied with the best")):
        _mark(draw, legend_x + 14, y + 10, status, best, cheapest)
        draw.text((legend_x + 34, y + 3), text, fill=INK, font=small)
        y += 24
    y += 8
    for number, p in enumerate(points, start=1):
        if y > HEIGHT - 20:
            draw.text((legend_x, y), f"... {len(points) - number + 1} more", fill=INK, font=small)
            break
        colour = {"front": FRONT, "dominated": (110, 110, 110), "over_budget": OVER}[p.status]
        draw.text((legend_x, y), f"{number:>2}  {p.label}"[:64], fill=colour, font=small)
        y += 15
    image.save(path)
    return path
