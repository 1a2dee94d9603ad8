"""Small files that parse into a lot: the hostile inputs of issue #40's root 3 and issue #52's
root 4 (the same bombs in every spelling the format allows: :data:`PDF_FILTER_SPELLINGS`,
:data:`DOCX_MAIN_PARTS`; recorded outputs bounded only over all their lines).

Each writer takes the size of what parsing would produce (elements, values, decoded bytes) and
writes a file far smaller than its byte cap. Shared by ``tests/security/test_parse_bounds.py`` and
``benchmarks/bench_hostile_files.py`` (peak memory and time to refusal, before/after).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import zipfile
import zlib
from pathlib import Path


#: The spellings of a stream's Flate filter a PDF may use (issue #52: each hid the stream from a
#: check that recognised spellings): name -> (the ``/Filter`` entry, extra objects, times deflated).
PDF_FILTER_SPELLINGS = {
    "name": (b"/Filter /FlateDecode", [], 1),
    "abbreviation": (b"/Filter /Fl", [], 1),
    "array": (b"/Filter [/FlateDecode]", [], 1),
    "name escape": (b"/Filter /Fl#61teDecode", [], 1),
    "escaped abbreviation in an array": (b"/Filter [ /F#6c ]", [], 1),
    "comment before the name": (b"/Filter %x\n/FlateDecode", [], 1),
    "indirect name": (b"/Filter 5 0 R", [b"/FlateDecode"], 1),
    "indirect array": (b"/Filter 5 0 R", [b"[/FlateDecode /FlateDecode]"], 2),
    "twice in an array": (b"/Filter [/FlateDecode /Fl]", [], 2),
    "far before stream": (b"/Filter /FlateDecode /Pad (" + b"x" * 8192 + b")", [], 1),
}


@functools.lru_cache(maxsize=4)
def _deflated_spaces(decoded_bytes: int, layers: int) -> bytes:
    """``decoded_bytes`` spaces deflated ``layers`` times."""
    inflater = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    body = b"".join(inflater.compress(chunk) for _ in range(decoded_bytes // len(chunk))) + inflater.flush()
    for _ in range(layers - 1):
        body = zlib.compress(body, 9)
    return body


def pdf_bomb(path: Path, decoded_bytes: int, spelling: str = "name") -> Path:
    """A one-page PDF whose content stream inflates to ``decoded_bytes`` of spaces, its filter
    written as :data:`PDF_FILTER_SPELLINGS` ``[spelling]`` says."""
    filter_entry, extra, layers = PDF_FILTER_SPELLINGS[spelling]
    body = _deflated_spaces(decoded_bytes, layers)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
               b"<< /Length %d %s >>\nstream\n" % (len(body), filter_entry) + body + b"\nendstream", *extra]
    out, offsets = io.BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for number, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    path.write_bytes(out.getvalue())
    return path


#: Where a DOCX may keep its main document (issue #52: a name outside ``*.xml`` skipped the tag
#: count): name -> (the part's path, how its XML is encoded, the relationship's target).
DOCX_MAIN_PARTS = {
    "word/document.xml": ("word/document.xml", "utf-8", "word/document.xml"),
    "another .xml name": ("word/body.xml", "utf-8", "word/body.xml"),
    "no suffix": ("word/document", "utf-8", "word/document"),
    "a .bin suffix": ("word/main.bin", "utf-8", "word/main.bin"),
    "an image's name": ("word/media/image1.png", "utf-8", "word/media/image1.png"),
    "upper case suffix": ("word/Document.XML", "utf-8", "word/Document.XML"),
    "absolute target": ("content/main.dat", "utf-8", "/content/main.dat"),
    "UTF-16 with a byte-order mark": ("word/main.bin", "utf-16", "word/main.bin"),
    "UTF-16 without a byte-order mark": ("word/main.bin", "utf-16-le", "word/main.bin"),
    "white space before the XML": ("word/main.txt", "utf-8-sig", "word/main.txt"),
}


def docx_many_elements(path: Path, elements: int, main_part: str = "word/document.xml", text: str = "") -> Path:
    """A DOCX whose main document holds ``elements`` empty paragraphs (and one of ``text``), kept where
    :data:`DOCX_MAIN_PARTS` ``[main_part]`` says (``[Content_Types].xml`` and ``_rels/.rels``
    point at it as Word's packaging rules allow)."""
    name, encoding, target = DOCX_MAIN_PARTS[main_part]
    document = ('<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                'wordprocessingml/2006/main"><w:body>' + "<w:p/>" * elements
                + (f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>" if text else "") + "</w:body></w:document>")
    if encoding == "utf-8-sig":
        document = "\n" * 300 + document.removeprefix('<?xml version="1.0"?>')
    main_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.'
                         'openxmlformats-package.relationships+xml"/><Override PartName="/' + name + '" ContentType="'
                         + main_type + '"/></Types>')
        archive.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/relationships"><Relationship Id="r1" Type="http://schemas.openxmlformats.org/'
                         'officeDocument/2006/relationships/officeDocument" Target="' + target + '"/></Relationships>')
        archive.writestr(name, document.encode(encoding))
    return path


def html_many_elements(path: Path, elements: int) -> Path:
    """An HTML page of ``elements`` tiny elements."""
    path.write_text("<html><body>" + "<b>x</b>" * elements + "</body></html>", encoding="utf-8")
    return path


def results_empty_objects(path: Path, values: int) -> Path:
    """A results file whose ``per_query`` is ``values`` empty objects."""
    path.write_text('{"format": "ragexp-results/1", "per_query": [' + ",".join(["{}"] * values) + "]}", encoding="utf-8")
    return path


def recorded_empty_objects(path: Path, values: int, lines: int = 100) -> Path:
    """A recorded-output JSONL file of ``lines`` responses holding ``values`` empty objects in all
    (each line within one parse's bound, the file not)."""
    per_line = "[" + ",".join(["{}"] * (values // lines)) + "]"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(lines):
            handle.write('{"query_id": "q%d", "response": %s}\n' % (i, per_line))
    return path


def yaml_many_nodes(path: Path, nodes: int) -> Path:
    """A YAML file (an eval set or a saved config) of ``nodes`` empty flow lists."""
    path.write_text("items: [" + ",".join(["[]"] * nodes) + "]\n", encoding="utf-8")
    return path


def jsonl_many_values(path: Path, values: int) -> Path:
    """A JSONL eval set whose lines hold ``values`` tags in all (each line a valid-looking item)."""
    per_line = 50_000
    lines = []
    for i in range(max(1, values // per_line)):
        lines.append(json.dumps({"id": f"q{i}", "query": "q", "tags": ["tag"] * per_line, "answerable": False}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gzip_bomb(path: Path, decoded_bytes: int) -> Path:
    """A gzip query log of ``decoded_bytes`` of ``a`` lines (one query, repeated)."""
    chunk = b"a\n" * (1 << 19)
    with gzip.open(path, "wb", compresslevel=9) as handle:
        for _ in range(decoded_bytes // len(chunk)):
            handle.write(chunk)
    return path


def distinct_queries_log(path: Path, queries: int) -> Path:
    """A plain query log of ``queries`` distinct queries."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(queries):
            handle.write(f"how do i rotate key number {i}\n")
    return path
