"""Markdown pages rendered to HTML, DOCX and PDF by libraries that write those formats, so the
converters are tested on real files: markdown-it-py renders HTML (wrapped in a help centre's
header, navigation, sidebar and footer), python-docx writes Word documents (Heading styles,
List Bullet/List Number, Table Grid tables, code runs in Courier New), fpdf2 lays out PDF pages
from the same HTML (DejaVu fonts, from matplotlib's package data; links and inline markup inside
table cells are dropped, which fpdf2 cannot nest there).

``render_corpus(src, dst, fmt)`` writes ``dst/<id>.<suffix>`` for every ``src/<id>.md``.
"""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path

FORMATS = ("html", "docx", "pdf")
SITE_HEADER = (
    '<header class="site"><a href="/">Relaywave Help Centre</a><nav><ul><li><a href="/start">Getting started</a></li>'
    '<li><a href="/webhooks">Webhooks</a></li><li><a href="/billing">Billing</a></li>'
    '<li><a href="/support">Contact support</a></li></ul></nav></header>'
)
SIDEBAR = '<aside><h3>In this section</h3><ul><li><a href="#">Overview</a></li><li><a href="#">Related articles</a></li></ul></aside>'
SITE_FOOTER = (
    "<footer><p>© 2026 Relaywave Ltd. All rights reserved. <a href=\"/privacy\">Privacy</a></p>"
    "<p>Was this article helpful? Yes / No</p></footer>"
)
BOILERPLATE_MARKERS = ("Relaywave Help Centre", "All rights reserved", "In this section", "Was this article helpful")


def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def markdown_title(text: str, fallback: str) -> str:
    return next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), fallback)


def to_html(text: str, title: str, *, charset: str = "utf-8") -> str:
    """A help-centre page: ``<title>``, site header with navigation, sidebar, the article in ``<main>``, footer."""
    meta = f'<meta charset="{charset}">' if charset else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head>{meta}<title>{html.escape(title)} | Relaywave Help</title></head>\n'
        f'<body>{SITE_HEADER}<div class="layout">{SIDEBAR}<main><article>\n{_markdown().render(text)}</article></main></div>'
        f"{SITE_FOOTER}</body></html>\n"
    )


def to_docx(text: str, path: Path) -> None:
    """A Word document of the Markdown ``text`` (headings, paragraphs, lists, tables, code)."""
    import docx
    from docx.shared import Pt

    document = docx.Document()
    tokens = _markdown().parse(text)
    lists: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            _add_inline(document.add_heading(level=int(token.tag[1])), tokens[i + 1])
            i += 3
            continue
        if token.type in ("bullet_list_open", "ordered_list_open"):
            lists.append("List Bullet" if token.type == "bullet_list_open" else "List Number")
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif token.type == "paragraph_open":
            _add_inline(document.add_paragraph(style=lists[-1] if lists else None), tokens[i + 1])
            i += 3
            continue
        elif token.type in ("fence", "code_block"):
            for line in token.content.rstrip("\n").split("\n"):
                run = document.add_paragraph().add_run(line)
                run.font.name, run.font.size = "Courier New", Pt(9)
        elif token.type == "table_open":
            rows, row, j = [], [], i
            while tokens[j].type != "table_close":
                if tokens[j].type == "tr_open":
                    row = []
                elif tokens[j].type == "inline":
                    row.append(tokens[j])
                elif tokens[j].type == "tr_close":
                    rows.append(row)
                j += 1
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = "Table Grid"
            for r, cells in enumerate(rows):
                for c, cell in enumerate(cells):
                    paragraph = table.cell(r, c).paragraphs[0]
                    _add_inline(paragraph, cell, bold=r == 0)
            i = j + 1
            continue
        i += 1
    document.save(str(path))


def _add_inline(paragraph, inline, *, bold: bool = False) -> None:
    strong = emphasis = False
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            run = paragraph.add_run(child.content)
            run.bold, run.italic = bold or strong, emphasis
            if child.type == "code_inline":
                run.font.name = "Courier New"
        elif child.type in ("strong_open", "strong_close"):
            strong = child.type == "strong_open"
        elif child.type in ("em_open", "em_close"):
            emphasis = child.type == "em_open"
        elif child.type == "softbreak":
            paragraph.add_run(" ")
        elif child.type == "hardbreak":
            paragraph.add_run().add_break()


def to_pdf(text: str, path: Path) -> None:
    """PDF pages of the Markdown ``text``, laid out by fpdf2's HTML renderer."""
    from fpdf import FPDF
    from fpdf.html import FontFace

    fonts = Path(importlib.util.find_spec("matplotlib").submodule_search_locations[0]) / "mpl-data" / "fonts" / "ttf"
    pdf = FPDF()
    pdf.set_auto_page_break(True, 15)
    for family, stem in (("dejavu", "DejaVuSans"), ("mono", "DejaVuSansMono")):
        for style, suffix in (("", ""), ("B", "-Bold"), ("I", "-Oblique"), ("BI", "-BoldOblique")):
            pdf.add_font(family, style, str(fonts / f"{stem}{suffix}.ttf"))
    pdf.add_page()
    pdf.set_font("dejavu", size=10)
    body = re.sub(r"</?a\b[^>]*>", "", _markdown().render(text))
    body = re.sub(r"<table>.*?</table>", lambda m: re.sub(r"</?(code|strong|em)>", "", m.group(0)), body, flags=re.S)
    pdf.write_html(body, font_family="dejavu", tag_styles={"code": FontFace(family="mono"), "pre": FontFace(family="mono")})
    pdf.output(str(path))


def render_corpus(src: Path, dst: Path, fmt: str, ids: list[str] | None = None) -> Path:
    """Every ``src/**/<id>.md`` (or those in ``ids``) as ``dst/<id>.<fmt>``; returns ``dst``."""
    for source in sorted(src.rglob("*.md")):
        doc_id = source.relative_to(src).with_suffix("").as_posix()
        if ids is not None and doc_id not in ids:
            continue
        text = source.read_text(encoding="utf-8")
        target = dst / f"{doc_id}.{fmt}"
        target.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "html":
            target.write_text(to_html(text, markdown_title(text, source.stem)), encoding="utf-8")
        elif fmt == "docx":
            to_docx(text, target)
        elif fmt == "pdf":
            to_pdf(text, target)
        else:
            raise ValueError(f"unknown format {fmt!r}; one of {FORMATS}")
    return dst
