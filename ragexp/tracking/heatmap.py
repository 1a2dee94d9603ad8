"""A metric's heatmap as a PNG, drawn with Pillow: rows x columns of annotated cells, one panel per
value combination of the other axes, one colour scale over all panels.

Drawn directly rather than with matplotlib: the summary draws one heatmap per headline metric at
the end of every sweep, where matplotlib's import, layout and text rendering would be most of the
summary's time.

Colour: matplotlib's ``viridis`` (perceptually uniform, readable in grey and by colour-blind
readers), sampled at :data:`VIRIDIS` and interpolated linearly; ``low`` maps to its darkest end,
``high`` to its brightest. A cell's value is printed white on the darker half of the scale and
black on the brighter half; the best cell's value is bold (drawn twice, one pixel apart) and the
cell outlined. A missing value (``NaN``) is a blank cell.
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
BACKGROUND, INK, BLANK = (255, 255, 255), (0, 0, 0), (238, 238, 238)


@dataclass(frozen=True)
class Panel:
    """One grid of values (``grid[row][column]``, ``NaN`` for no value) under its ``title`` lines."""

    title: str
    grid: Sequence[Sequence[float]]


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


def draw_heatmap(path: Path, title: str, rows: Sequence[str], cols: Sequence[str], row_label: str, col_label: str,
                 panels: Sequence[Panel], low: float, high: float, best: float | None) -> Path:
    """Write the heatmap PNG (module docstring) to ``path`` and return it."""
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
    width = PAD + panel_w * len(panels)
    height = top + grid_h + 2 * (line_h + 8) + PAD
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
                centre = ((box[0] + box[2]) / 2, y + CELL_H / 2)
                for shift in (0, 1) if is_best else (0,):  # bold: the text again, one pixel to the right
                    draw.text((centre[0] + shift, centre[1]), f"{value:.3f}", fill=colour, font=small, anchor="mm")
        tick_y = top + grid_h + 4
        for j, col in enumerate(cols):
            draw.text((x0 + j * CELL_W + CELL_W / 2, tick_y), col, fill=INK, font=small, anchor="ma")
        if col_label:
            draw.text((grid_mid, tick_y + line_h + 8), col_label, fill=INK, font=small, anchor="ma")
        if row_label:
            image.paste(label, (PAD + index * panel_w, round(top + grid_h / 2 - label.height / 2)))
    image.save(path, format="PNG", optimize=False)
    return path
