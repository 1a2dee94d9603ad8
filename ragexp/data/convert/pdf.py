"""PDF -> text with headings and a page map: the text layer as PDFium (pypdfium2) reads it.

- Text: each page's text layer in PDFium's order (the order the page draws its text, lines as
  PDFium breaks them), pages one after another, each ending with a line break;
  ``Converted.page_starts[i]`` is the offset where page ``i + 1`` begins.
- Headings: a line whose font (the largest of its first, middle and last visible character)
  is at least :data:`HEADING_SCALE` times the body size (the size most characters of the
  document are set in) and that holds a letter and at most
  :data:`MAX_HEADING_CHARS` characters becomes a ``#`` heading; the largest heading size is level
  1, the next level 2 (up to 6); consecutive heading lines of one size are one heading (a
  heading wrapped over two lines).
- Kept as plain lines: tables (cells separated by spaces, a row per line as PDFium breaks it),
  lists (with their bullet characters), code. Not recovered: paragraph breaks within a page,
  columns whose lines the page interleaves, hyphenation at line ends, text in images.

PDFium reads the file in a child process bounded in memory, time and output
(:mod:`ragexp.data.convert.isolated`): whatever spelling of a filter, name or object a PDF uses,
what PDFium decodes stays within that child's address space. Refused, one line each: a PDF that
needs more than that (a "PDF bomb"), one whose streams decode to more than
:data:`~ragexp.data.convert.pdf_streams.MAX_DECODED_BYTES` as the standard filter spellings count
them (an early refusal before PDFium starts, :mod:`ragexp.data.convert.pdf_streams`), a PDF with a password to open it (an owner password that only restricts
printing or copying does not stop reading), a damaged file, a PDF without pages, and a scanned
PDF (no page has a text layer: OCR it first). Pages without text in an otherwise readable PDF are
listed in a note.
"""

from __future__ import annotations

import re
from collections import Counter

from ragexp.data.convert.base import Converted, ConvertOptions, Unconvertible
from ragexp.data.convert.isolated import run_isolated
from ragexp.data.convert.pdf_streams import check_decoded_size

HEADING_SCALE = 1.15
MAX_HEADING_CHARS = 150
MAX_HEADING_LEVEL = 6
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_CONTROL = re.compile(r"[\x00\x01\x03-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_LETTER = re.compile(r"[^\W\d_]")

Line = tuple[str, float]  # text, largest font size of its first, middle and last visible character (0.0: none)


def convert_pdf(data: bytes, options: ConvertOptions) -> Converted:
    check_decoded_size(data)
    pages = [[(text, size) for text, size in lines] for lines in run_isolated(read_pages, data, "PDFium")]
    if not pages:
        raise Unconvertible("a PDF without pages")
    empty = [number for number, lines in enumerate(pages, 1) if not any(text.strip() for text, _ in lines)]
    if len(empty) == len(pages):
        which = "its one page has no text layer" if len(pages) == 1 else f"none of its {len(pages)} pages has a text layer"
        raise Unconvertible(f"scanned PDF: {which}; run OCR on it first (e.g. ocrmypdf) or leave it out")
    levels = heading_levels(pages)
    parts: list[str] = []
    page_starts: list[int] = []
    length = 0
    for lines in pages:
        page_starts.append(-1)  # set where the page's first line lands (after a separating blank line)
        previous_heading: tuple[int, int] | None = None  # (index in parts, level) of a heading that may go on
        for text, size in lines:
            level = levels.get(round(size, 1)) if _is_heading_candidate(text) else None
            if level is not None and previous_heading is not None and previous_heading[1] == level:
                index = previous_heading[0]  # a wrapped heading: its next line joins it
                joined = parts[index].rstrip("\n") + " " + text.strip() + "\n\n"
                length += len(joined) - len(parts[index])
                parts[index] = joined
                continue
            if level is not None:
                if length and not parts[-1].endswith("\n\n"):
                    parts.append("\n")
                    length += 1
                piece = "#" * level + " " + text.strip() + "\n\n"
                previous_heading = (len(parts), level)
            else:
                piece = text + "\n"
                previous_heading = None
            if page_starts[-1] < 0:
                page_starts[-1] = length
            parts.append(piece)
            length += len(piece)
        if page_starts[-1] < 0:  # a page without text starts where the next one does
            page_starts[-1] = length
    notes = ()
    if empty:
        notes = (f"{len(empty)} of {len(pages)} pages have no text layer (scanned?): pages {_ranges(empty)}",)
    return Converted(text="".join(parts), page_starts=tuple(page_starts), notes=notes)


def read_pages(data: bytes) -> list[list[Line]]:
    """Every page's lines with their font sizes; encrypted or damaged files raise :class:`Unconvertible`."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as err:
        reason = str(err).split("(PDFium: ", 1)[-1].rstrip(").") if "(PDFium: " in str(err) else str(err)
        if "password" in reason.lower():
            raise Unconvertible("encrypted PDF: it needs a password to open; save a copy without the password "
                                "(e.g. qpdf --decrypt --password=PW in.pdf out.pdf)") from None
        raise Unconvertible(f"damaged PDF, PDFium cannot open it ({reason.lower()})") from None
    try:
        return [_page_lines(document, index) for index in range(len(document))]
    finally:
        document.close()


def _page_lines(document, index: int) -> list[Line]:
    import pypdfium2.raw as pdfium_c

    page = document[index]
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        text = textpage.get_text_range(0, count) if count > 0 else ""
        aligned = len(text) == count  # char i of the text page is text[i] unless it has characters outside the BMP
        lines: list[Line] = []
        start = 0
        for match in [*_LINE_BREAK.finditer(text), None]:
            end = match.start() if match else len(text)
            line = text[start:end]
            size = 0.0
            if aligned and line.strip():
                first = start + len(line) - len(line.lstrip())
                last = start + len(line.rstrip()) - 1
                size = max(pdfium_c.FPDFText_GetFontSize(textpage.raw, i) for i in {first, (first + last) // 2, last})
            lines.append((_CONTROL.sub("", line.replace("\x02", "-")), size))
            start = match.end() if match else end
    finally:
        textpage.close()
        page.close()
    while lines and not lines[-1][0].strip():
        lines.pop()
    return lines


def heading_levels(pages: list[list[Line]]) -> dict[float, int]:
    """Font size (0.1 pt) -> heading level, from the body size (see the module docstring)."""
    weight: Counter[float] = Counter()
    for lines in pages:
        for text, size in lines:
            if size > 0:
                weight[round(size, 1)] += len(text.strip())
    if not weight:
        return {}
    body = weight.most_common(1)[0][0]
    heading_sizes = sorted((size for size in weight if size >= body * HEADING_SCALE), reverse=True)
    return {size: min(rank, MAX_HEADING_LEVEL) for rank, size in enumerate(heading_sizes, 1)}


def _is_heading_candidate(text: str) -> bool:
    stripped = text.strip()
    return 0 < len(stripped) <= MAX_HEADING_CHARS and _LETTER.search(stripped) is not None


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    out: list[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        out.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ", ".join(out)
