"""HTML -> Markdown: BeautifulSoup (lxml parser) finds the content, markdownify writes Markdown.

Decoding (the bytes' character encoding), in this order: a byte-order mark; a ``charset``
declared in a ``<meta>`` tag within the first 1024 bytes (``ISO-8859-1``, ``latin1`` and
``US-ASCII`` mean windows-1252, as browsers read them); else UTF-8 when the bytes are valid
UTF-8; else windows-1252, with a note. Bytes the chosen encoding cannot decode become U+FFFD,
with a note counting them.

Kept: headings (``#`` .. ``######``), paragraphs, lists, tables (Markdown tables, first row as
header when the table has none), code (fenced blocks, inline backticks), emphasis, link *text*.
Dropped always: ``<head>``, scripts, styles, templates, frames, images, link targets. Dropped as
boilerplate (``html_remove_boilerplate=true``, the default): ``<nav>``, ``<aside>``, a page-level
``<header>``/``<footer>`` (not one inside ``<article>``/``<section>``/``<main>``, which belongs to
that content) and elements whose ARIA role is navigation, banner, contentinfo, complementary or
search; then only ``<main>`` (or ``role="main"``) is kept when the page has one.

Title: ``<title>``, else the first ``<h1>``, else "" (the loader then uses the file name).

Bounded before parsing: a page with more than :data:`MAX_ELEMENTS` tags (counted as ``<``
followed by a letter, ``/`` or ``!``, an upper bound of the elements a parser can build) is
refused, since every element costs the parse tree about 1 KB (a 20 MB page of tiny elements grew
to 2.9 GB before).
"""

from __future__ import annotations

import codecs
import re

from ragexp.data.convert.base import Converted, ConvertOptions, Unconvertible

PRESCAN_BYTES = 1024
#: Tags one page may hold (a long reference page has tens of thousands; ~0.25 GB of parse tree at the bound).
MAX_ELEMENTS = 200_000
_TAG = re.compile(r"<[A-Za-z/!?]")
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
#: Labels browsers decode as windows-1252 (WHATWG Encoding Standard), not as their Python codec.
_WINDOWS_1252_LABELS = {"iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "windows-1252", "cp1252"}
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_ALWAYS_DROPPED = ["head", "script", "style", "noscript", "template", "iframe", "frame", "object", "embed", "svg", "canvas"]
_BOILERPLATE_TAGS = ["nav", "aside"]
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
_SECTIONING = ["article", "aside", "main", "nav", "section"]


def decode_html(data: bytes) -> tuple[str, list[str]]:
    """The document's text and notes about how it was decoded (see the module docstring)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode(data[len(bom):], encoding, "its byte-order mark")
    declared = _META_CHARSET.search(data[:PRESCAN_BYTES])
    notes: list[str] = []
    if declared:
        label = declared.group(1).decode("ascii").lower()
        encoding = "cp1252" if label in _WINDOWS_1252_LABELS else _python_codec(label)
        if encoding is not None and not encoding.startswith("utf-16"):  # a <meta> read as ASCII cannot be UTF-16
            return _decode(data, encoding, f"<meta charset={label}>")
        notes.append(f"its <meta> declares charset {label!r}, unknown or impossible here; the declaration is ignored")
    try:
        return data.decode("utf-8"), notes
    except UnicodeDecodeError:
        text, more = _decode(data, "cp1252", "no charset declared and not valid UTF-8")
        return text, [*notes, "no charset declared and not valid UTF-8: decoded as windows-1252", *more]


def _python_codec(label: str) -> str | None:
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _decode(data: bytes, encoding: str, source: str) -> tuple[str, list[str]]:
    try:
        return data.decode(encoding), []
    except UnicodeDecodeError as err:
        return data.decode(encoding, errors="replace"), [
            f"bytes not valid in {encoding} (from {source}), the first at byte {err.start}, were replaced by U+FFFD"]


def html_to_markdown(html: str, *, remove_boilerplate: bool) -> tuple[str, str]:
    """``(markdown, title)`` of an HTML document (see the module docstring)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title is not None else ""
    for tag in soup(_ALWAYS_DROPPED):
        _drop(tag)
    root = soup.body or soup
    if remove_boilerplate:
        for tag in soup.find_all(_BOILERPLATE_TAGS) + soup.find_all(attrs={"role": True}):
            if tag.name in _BOILERPLATE_TAGS or str(tag.get("role", "")).strip().lower() in _BOILERPLATE_ROLES:
                _drop(tag)
        for tag in soup.find_all(["header", "footer"]):
            if not tag.decomposed and tag.find_parent(_SECTIONING) is None:
                _drop(tag)
        main = soup.find("main") or soup.find(attrs={"role": "main"})
        if main is not None and main.get_text(strip=True):
            root = main
    if not title:
        first = root.find("h1")
        title = " ".join(first.get_text(" ").split()) if first is not None else ""
    return markdown_of(root), title


def markdown_of(root) -> str:
    """Markdown of a BeautifulSoup element: ATX headings, ``-`` bullets, no escaping of ``*``/``_``
    (the text keeps what the page shows), link and image targets left out, tables with a header."""
    from markdownify import MarkdownConverter

    converter = MarkdownConverter(
        heading_style="ATX", bullets="-", escape_asterisks=False, escape_underscores=False, escape_misc=False,
        strip=["a", "img"], table_infer_header=True,
    )
    return tidy(converter.convert_soup(root))


def tidy(markdown: str) -> str:
    """Trailing spaces removed, at most one blank line in a row, no blank lines at either end."""
    lines = [line.rstrip() for line in markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def _drop(tag) -> None:
    if not tag.decomposed:
        tag.decompose()


def check_element_count(markup: str) -> None:
    """Refuse markup (decoded) with more than :data:`MAX_ELEMENTS` tags, before any parser builds a tree."""
    if markup.count("<") > MAX_ELEMENTS and (tags := sum(1 for _ in _TAG.finditer(markup))) > MAX_ELEMENTS:
        raise Unconvertible(f"{tags:,} HTML tags, more than the {MAX_ELEMENTS:,} one document may hold "
                            "(refused before parsing); split the page")


def convert_html(data: bytes, options: ConvertOptions) -> Converted:
    text, notes = decode_html(data)
    check_element_count(text)
    markdown, title = html_to_markdown(text, remove_boilerplate=options.html_remove_boilerplate)
    return Converted(text=markdown, title=title, notes=tuple(notes))
