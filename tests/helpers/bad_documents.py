"""Real files of the kinds a corpus folder must survive, written by the libraries that write those
formats: a scanned (image-only) PDF (Pillow), a password-protected PDF (fpdf2's AES-256
encryption), a truncated DOCX (python-docx, cut short), HTML in windows-1252 with and without a
``<meta charset>``, and a long PDF (fpdf2 pages repeated by pypdfium2)."""

from __future__ import annotations

from pathlib import Path

LEGACY_SENTENCE = "Die Garantie beträgt 10 Jahre – „ohne Aufpreis“ für 50 €."


def scanned_pdf(path: Path) -> Path:
    """A one-page PDF holding only a picture of text (no text layer), as a scanner writes it."""
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("RGB", (1240, 1754), "white")
    ImageDraw.Draw(page).text((100, 100), "The inverter is covered for 10 years.", fill="black",
                              font=ImageFont.load_default(size=28))
    page.save(path, resolution=150)
    return path


def text_pdf(path: Path, paragraphs: list[str], *, user_password: str | None = None) -> Path:
    """A PDF with a text layer (core Helvetica, one paragraph after another), password-protected
    (AES-256, ``user_password`` needed to open it) when given."""
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF()
    if user_password is not None:
        pdf.set_encryption(owner_password="owner-" + user_password, user_password=user_password,
                           encryption_method=EncryptionMethod.AES_256)
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for paragraph in paragraphs:
        pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    pdf.output(str(path))
    return path


def long_pdf(path: Path, pages: int) -> Path:
    """A ``pages``-page PDF: ten distinct pages (a heading and three paragraphs each, the page
    number in the text) written by fpdf2, repeated by pypdfium2 until there are ``pages``."""
    import pypdfium2 as pdfium
    from fpdf import FPDF

    pdf = FPDF()
    body = ("Each inverter reports its yield every fifteen minutes; the portal keeps the readings for "
            "ten years and exports them as CSV. ") * 6
    for number in range(1, min(pages, 10) + 1):
        pdf.add_page()
        pdf.set_font("helvetica", style="B", size=16)
        pdf.cell(0, 10, f"Section {number}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for paragraph in range(3):
            pdf.multi_cell(0, 6, f"Page {number} paragraph {paragraph + 1}. {body}", new_x="LMARGIN", new_y="NEXT")
    template = pdfium.PdfDocument(bytes(pdf.output()))
    document = pdfium.PdfDocument.new()
    while len(document) < pages:
        document.import_pages(template, list(range(min(len(template), pages - len(document)))))
    document.save(str(path))
    document.close()
    template.close()
    return path


def truncated_docx(path: Path) -> Path:
    """A Word document cut off after its first 3,000 bytes (a broken download)."""
    import docx

    document = docx.Document()
    document.add_heading("Firmware updates", level=1)
    document.add_paragraph("Firmware updates are installed automatically at night.")
    document.save(str(path))
    path.write_bytes(path.read_bytes()[:3000])
    return path


def legacy_html(path: Path, *, declared: bool) -> Path:
    """A German page in windows-1252 (``–``, ``„“`` and ``€`` are bytes 0x80-0x9f there), with
    ``<meta charset="windows-1252">`` when ``declared``, else with no charset at all."""
    meta = '<meta charset="windows-1252">' if declared else ""
    html = (f"<html><head>{meta}<title>Garantie</title></head><body><h1>Garantie für Wechselrichter</h1>"
            f"<p>{LEGACY_SENTENCE}</p></body></html>")
    path.write_bytes(html.encode("cp1252"))
    return path
