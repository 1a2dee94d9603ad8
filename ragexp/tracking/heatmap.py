"""A metric's heatmap as a PNG, drawn with Pillow: rows x columns of annotated cells, one panel per
value combination of the other axes, one colour scale over all panels with a colour bar.

Drawn directly rather than with matplotlib: the summary draws one heatmap per headline metric at
the end of every sweep, where matplotlib's import, layout and text rendering would be most of the
summary's time.

Colour: matplotlib's ``viridis`` (perceptually uniform, readable in grey and by colour-blind
readers), sampled at :data:`VIRIDIS` and interpolated linearly; ``low`` maps to its darkest end,
``high`` to its brightest; the caller anchors ``low``/``high`` (:func:`anchored_scale`), the colour
bar at the right shows them and, when given, the noise band. A cell's value is printed white on
the darker half of the scale and black on the brighter half, with its CI half-width below it
(``± 0.057``) when the panel has them; the best cell's value is bold (drawn twice, one pixel
apart) and the cell outlined; a cell tied with the best (:mod:`ragexp.comparison.vs_best`) gets a
dashed outline. A missing value (``NaN``) is a blank cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: matplotlib's viridis at 0, 1/16, ..., 1 (RGB 0-255).
VIRIDIS = (
    (68, 1, 84), (72, 24, 106), (71, 45, 123), (66, 64, 134), (59, 82, 139), (51, 99, 141), (44, 114, 142),
    (38, 130, 142), (33, 145, 140), (31, 160, 136), (40, 174, 128), (63, 188, 115), (94, 201, 98), (132, 212, 75),
    (173, 220, 48), (216, 226, 25), (253, 231, 37),
)
CELL_W, CELL_H = 96, 44
PAD = 10
BAR_W, BAR_H, BAR_GAP = 14, 120, 16
NOISE_SPAN = 4.0
"""The colour scale spans at least this many noise widths: a difference at the edge of the noise
moves a cell at most a quarter of the way along the colour bar."""
BACKGROUND, INK, BLANK = (255, 255, 255), (0, 0, 0), (238, 238, 238)


@dataclass(frozen=True)
class Panel:
    """One grid of values (``grid[row][column]``, ``NaN`` for no value) under its ``title`` lines."""

    title: str
    grid: Sequence[Sequence[float]]
    half_widths: Sequence[Sequence[float]] | None = None  # CI half-width per cell, NaN for none
    tied: Sequence[Sequence[bool]] | None = None  # cells tied with the best


def anchored_scale(values: Sequence[float], noise: float | None, bounds: tuple[float, float] = (0.0, 1.0)
                   ) -> tuple[float, float]:
    """``(low, high)`` of the colour scale: the values' range, widened about its centre to at
    least ``NOISE_SPAN * noise`` and kept inside ``bounds``, so differences inside the noise
    never span the colour bar (a min-max scale paints 0.621 vs 0.635 as far apart as 0 vs 1)."""
    if not values:
        return bounds
    low, high = min(values), max(values)
    want = min(max(high - low, NOISE_SPAN * (noise or 0.0)), bounds[1] - bounds[0])
    centre = (low + high) / 2
    low = min(max(bounds[0], centre - want / 2), bounds[1] - want)
    return low, low + want


def viridis(t: float) -> tuple[int, int, int]:
    """The viridis colour at ``t`` in [0, 1] (clamped)."""
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    frac = t - i
    return tuple(round(a + (b - a) * frac) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1]))


def _fonts():
    from PIL import ImageFont

    return ImageFont.load_default(size=12), ImageFont.load_default(size=15)


def _text_size(font, text: str) -> tuple[int, int]:
    left, top, right, bottom = font.getbbox(text)
    return right - left, bottom - top


def _lines_height(font, text: str) -> int:
    return sum(_text_size(font, line or " ")[1] + 4 for line in text.split("\n")) if text else 0


def _dashed_box(draw, box: tuple[float, float, float, float], colour, dash: int = 6, width: int = 2) -> None:
    x0, y0, x1, y1 = box
    for start in range(int(x0), int(x1), 2 * dash):
        end = min(start + dash, int(x1))
        draw.line([(start, y0 + 1), (end, y0 + 1)], fill=colour, width=width)
        draw.line([(start, y1 - 1), (end, y1 - 1)], fill=colour, width=width)
    for start in range(int(y0), int(y1), 2 * dash):
        end = min(start + dash, int(y1))
        draw.line([(x0 + 1, start), (x0 + 1, end)], fill=colour, width=width)
        draw.line([(x1 - 1, start), (x1 - 1, end)], fill=colour, width=width)


def _colour_bar(draw, font, x: float, y: float, low: float, high: float, noise: float | None) -> None:
    """The scale from ``high`` (top) to ``low`` (bottom), labelled, with the noise band's height
    beside it when ``noise`` is given."""
    draw.rectangle((x, y, x + BAR_W, y + BAR_H + 1), outline=INK)
    for row in range(BAR_H):
        draw.line([(x + 1, y + 1 + row), (x + BAR_W - 1, y + 1 + row)], fill=viridis(1 - row / (BAR_H - 1)))
    draw.text((x + BAR_W + 4, y), f"{high:.3f}", fill=INK, font=font, anchor="lm")
    draw.text((x + BAR_W + 4, y + BAR_H), f"{low:.3f}", fill=INK, font=font, anchor="lm")
    if noise and high > low:
        band = min(BAR_H, BAR_H * noise / (high - low))
        top = y + BAR_H / 2 - band / 2
        draw.line([(x - 4, top), (x - 4, top + band)], fill=INK, width=2)
        draw.text((x - 8, y + BAR_H + 16), f"noise ±{noise:.3f}", fill=INK, font=font, anchor="lm")


def draw_heatmap(path: Path, title: str, rows: Sequence[str], cols: Sequence[str], row_label: str, col_label: str,
                 panels: Sequence[Panel], low: float, high: float, best: float | None, noise: float | None = None) -> Path:
    """Write the heatmap PNG (module docstring) to ``path`` and return it; ``noise`` is the
    smallest difference the eval set detects, drawn as a band beside the colour bar."""
    from PIL import Image, ImageDraw

    small, large = _fonts()
    line_h = _text_size(small, "Ag")[1]
    row_names_w = max((_text_size(small, r)[0] for r in rows), default=0)
    label_w = _text_size(small, row_label)[1] + 8 if row_label else 0
    panel_titles_h = max((_lines_height(small, p.title) for p in panels), default=0)
    grid_w, grid_h = CELL_W * len(cols), CELL_H * len(rows)
    panel_w = label_w + row_names_w + 8 + grid_w + 2 * PAD
    title_h = _text_size(large, title)[1] + 2 * PAD
    top = title_h + panel_titles_h + (6 if panel_titles_h else 0)
    bar_x = PAD + panel_w * len(panels) + BAR_GAP
    width = bar_x + BAR_W + max(_text_size(small, "noise ±0.000")[0], _text_size(small, "0.000")[0] + BAR_W) + PAD
    height = max(top + grid_h + 2 * (line_h + 8) + PAD, top + BAR_H + line_h + 28)
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((width / 2, PAD), title, fill=INK, font=large, anchor="mt")
    span = high - low if high > low else 1.0
    if row_label:  # drawn once, rotated, pasted beside each panel
        w, h = _text_size(small, row_label)
        label = Image.new("RGB", (w + 4, h + 6), BACKGROUND)
        ImageDraw.Draw(label).text((2, 0), row_label, fill=INK, font=small)
        label = label.rotate(90, expand=True)
    for index, panel in enumerate(panels):
        x0 = PAD + index * panel_w + label_w + row_names_w + 8
        grid_mid = x0 + grid_w / 2
        draw.multiline_text((grid_mid, title_h), panel.title, fill=INK, font=small, anchor="ma", align="center")
        for i, row in enumerate(rows):
            y = top + i * CELL_H
            draw.text((x0 - 6, y + CELL_H / 2), row, fill=INK, font=small, anchor="rm")
            for j in range(len(cols)):
                value = panel.grid[i][j]
                box = (x0 + j * CELL_W, y, x0 + (j + 1) * CELL_W - 1, y + CELL_H - 1)
                if math.isnan(value):
                    draw.rectangle(box, fill=BLANK)
                    continue
                t = (value - low) / span
                draw.rectangle(box, fill=viridis(t))
                colour = BACKGROUND if t < 0.5 else INK
                is_best = best is not None and value == best
                if is_best:
                    draw.rectangle(box, outline=colour, width=2)
                elif panel.tied is not None and panel.tied[i][j]:
                    _dashed_box(draw, box, colour)
                half = panel.half_widths[i][j] if panel.half_widths is not None else math.nan
                centre = ((box[0] + box[2]) / 2, y + CELL_H / 2 - (7 if not math.isnan(half) else 0))
                for shift in (0, 1) if is_best else (0,):  # bold: the text again, one pixel to the right
                    draw.text((centre[0] + shift, centre[1]), f"{value:.3f}", fill=colour, font=small, anchor="mm")
                if not math.isnan(half):
                    draw.text((centre[0], centre[1] + 15), f"± {half:.3f}", fill=colour, font=small, anchor="mm")
        tick_y = top + grid_h + 4
        for j, col in enumerate(cols):
            draw.text((x0 + j * CELL_W + CELL_W / 2, tick_y), col, fill=INK, font=small, anchor="ma")
        if col_label:
            draw.text((grid_mid, tick_y + line_h + 8), col_label, fill=INK, font=small, anchor="ma")
        if row_label:
            image.paste(label, (PAD + index * panel_w, round(top + grid_h / 2 - label.height / 2)))
    _colour_bar(draw, small, bar_x, top, low, high, noise)
    image.save(path, format="PNG", optimize=False)
    return path
