"""Converters for documents that are not plain text, by file suffix (see each module's docstring
for what it keeps and drops): ``.html``/``.htm`` (:mod:`.html`), ``.pdf`` (:mod:`.pdf`),
``.docx`` (:mod:`.docx`)."""

from __future__ import annotations

from ragexp.data.convert.base import Converted, Converter, ConvertOptions, Unconvertible
from ragexp.data.convert.docx import convert_docx
from ragexp.data.convert.html import convert_html
from ragexp.data.convert.pdf import convert_pdf

# Revision 2 of each: the bounds on what parsing produces (a file refused now was converted before,
# so a conversion cached by revision 1 must not be reused); revision 3 of PDF and DOCX: the library
# reads in a bounded child process, whatever the file spells (issue #52), for the same reason.
CONVERTERS = (
    Converter("html", (".html", ".htm"), 2, ("beautifulsoup4", "lxml", "markdownify"), convert_html,
              options=("html_remove_boilerplate",)),
    Converter("pdf", (".pdf",), 3, ("pypdfium2",), convert_pdf),
    Converter("docx", (".docx",), 3, ("mammoth", "beautifulsoup4", "lxml", "markdownify"), convert_docx),
)
_BY_SUFFIX = {suffix: converter for converter in CONVERTERS for suffix in converter.suffixes}
CONVERTED_SUFFIXES = tuple(_BY_SUFFIX)


def converter_for(suffix: str) -> Converter | None:
    """The converter of a file suffix (case-insensitive, with the dot), ``None`` for none."""
    return _BY_SUFFIX.get(suffix.lower())


__all__ = ["CONVERTERS", "CONVERTED_SUFFIXES", "Converted", "Converter", "ConvertOptions", "Unconvertible", "converter_for"]
