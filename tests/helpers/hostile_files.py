"""Small files that parse into a lot: the hostile inputs of issue #40's root 3.

Each writer takes the size of what parsing would produce (elements, values, decoded bytes) and
writes a file far smaller than its byte cap. Shared by ``tests/security/test_parse_bounds.py`` and
``benchmarks/bench_hostile_files.py`` (peak memory and time to refusal, before/after).
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
import zlib
from pathlib import Path


def pdf_bomb(path: Path, decoded_bytes: int) -> Path:
    """A one-page PDF whose content stream (FlateDecode) inflates to ``decoded_bytes`` of spaces."""
    inflater = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    body = b"".join(inflater.compress(chunk) for _ in range(decoded_bytes // len(chunk))) + inflater.flush()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream"]
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


def docx_many_elements(path: Path, elements: int) -> Path:
    """A DOCX whose ``word/document.xml`` holds ``elements`` empty paragraphs."""
    document = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                'wordprocessingml/2006/main"><w:body>' + "<w:p/>" * elements + "</w:body></w:document>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/'
                         'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
        archive.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/relationships"><Relationship Id="r1" Type="http://schemas.openxmlformats.org/'
                         'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        archive.writestr("word/document.xml", document)
    return path


def html_many_elements(path: Path, elements: int) -> Path:
    """An HTML page of ``elements`` tiny elements."""
    path.write_text("<html><body>" + "<b>x</b>" * elements + "</body></html>", encoding="utf-8")
    return path


def results_empty_objects(path: Path, values: int) -> Path:
    """A results file whose ``per_query`` is ``values`` empty objects."""
    path.write_text('{"format": "ragexp-results/1", "per_query": [' + ",".join(["{}"] * values) + "]}", encoding="utf-8")
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
