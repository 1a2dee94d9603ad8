"""DOCX -> Markdown: mammoth writes semantic HTML, which goes the HTML converter's way to Markdown.

Kept: headings (Word's Heading 1-6 styles), paragraphs, bulleted and numbered lists, tables
(Markdown tables), bold/italic, footnotes and endnotes (at the end), link text; code where the
document marks it with a code style (``Source Code``/``Verbatim Char`` as pandoc writes them,
Word's ``HTML Preformatted``/``HTML Code``). Dropped: images, headers and footers of the page
layout, comments, tracked deletions, text boxes mammoth does not read, fonts and colours (so
code set only in a monospaced font becomes plain text).

mammoth reads the file in a child process bounded in memory, time and output
(:mod:`ragexp.data.convert.isolated`): whatever the main document part is called (the package's
relationships may point anywhere) and whatever parts it pulls in, mammoth's tree stays within that
child's address space, and a DOCX that needs more is refused. Refused earlier, one line each,
before mammoth starts: a file that is not a ZIP archive (truncated, damaged, or an encrypted or
legacy ``.doc`` OLE file), a ZIP without a Word document in it, one that would unpack to more
than :data:`MAX_UNPACKED_BYTES` (a ZIP bomb: Python's ``zipfile`` stops every part at its declared
size, so the declared sizes bound what is unpacked), and one whose parts hold more than
:data:`MAX_XML_ELEMENTS` tags (``<`` counted in every unpacked part that reads as XML, whatever its
name, before any XML parser runs: every element costs mammoth's tree about 1 KB). The HTML mammoth writes is bounded like any HTML
page (:func:`ragexp.data.convert.html.check_element_count`).
"""

from __future__ import annotations

import io
import re
import zipfile

from ragexp.data.convert.base import Converted, ConvertOptions, Unconvertible
from ragexp.data.convert.html import check_element_count, markdown_of
from ragexp.data.convert.isolated import run_isolated

#: A Word document's text and styles unpack to a few MiB; 64 MiB allows large embedded images too, and the
#: XML parsers' memory (several times the unpacked size) stays bounded (a 0.7 MB file unpacking to 200 MiB is refused).
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
#: Tags in the XML parts (a 300-page report has ~100,000).
MAX_XML_ELEMENTS = 500_000
_OLE_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")
STYLE_MAP = """
p[style-name='Source Code'] => pre:separator('\\n')
p[style-name='HTML Preformatted'] => pre:separator('\\n')
r[style-name='Verbatim Char'] => code
r[style-name='HTML Code'] => code
"""


def convert_docx(data: bytes, options: ConvertOptions) -> Converted:
    from bs4 import BeautifulSoup

    _check_archive(data)
    html = run_isolated(mammoth_html, data, "mammoth")
    check_element_count(html)
    return Converted(text=markdown_of(BeautifulSoup(html, "lxml")))


def mammoth_html(data: bytes) -> str:
    """The HTML mammoth writes for the DOCX ``data`` (run in the bounded child of
    :mod:`ragexp.data.convert.isolated`)."""
    import mammoth

    try:
        return mammoth.convert_to_html(io.BytesIO(data), style_map=STYLE_MAP).value
    except MemoryError:
        raise
    except Exception as err:  # mammoth raises what its ZIP and XML readers raise on a damaged file
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise Unconvertible(f"damaged DOCX, mammoth cannot read it: {first}") from None


def _check_archive(data: bytes) -> None:
    if data.startswith(_OLE_MAGIC):
        raise Unconvertible("not a DOCX but an OLE file: a password-protected document or a legacy Word .doc; "
                            "save it as .docx without a password")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            unpacked = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise Unconvertible("not a DOCX file (no ZIP archive can be read from it): truncated or damaged") from None
    if "word/document.xml" not in names and "[Content_Types].xml" not in names:
        raise Unconvertible("a ZIP archive without a Word document in it (no word/document.xml)")
    if unpacked > MAX_UNPACKED_BYTES:
        raise Unconvertible(f"would unpack to {unpacked / 2**20:.0f} MiB (more than "
                            f"{MAX_UNPACKED_BYTES // 2**20} MiB); refused as a possible ZIP bomb")
    tags = _xml_tags(data)
    if tags > MAX_XML_ELEMENTS:
        raise Unconvertible(f"its XML parts hold {tags:,} tags, more than the {MAX_XML_ELEMENTS:,} one document may "
                            "hold (refused before parsing)")


def _xml_tags(data: bytes) -> int:
    """``<`` in the archive's parts that read as XML (:func:`_reads_as_xml`, whatever their names), each
    part unpacked (to its declared size) in turn."""
    tags = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                part = archive.read(info)
                if _reads_as_xml(part):
                    tags += part.count(b"<")
    except Exception as err:  # noqa: BLE001 - zipfile and zlib raise several types on a damaged part
        raise Unconvertible(f"damaged DOCX, a part cannot be unpacked: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    return tags


_XML_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*(?:<|\x00<)|\xff\xfe|\xfe\xff")


def _reads_as_xml(part: bytes) -> bool:
    """Whether an XML parser could read ``part``: UTF-16 (with or without its byte-order mark), or
    ``<`` first after a UTF-8 byte-order mark and white space (an image never begins so)."""
    return _XML_START.match(part) is not None
