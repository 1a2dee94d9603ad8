"""Conversion throughput per format, the cost of a cache hit, and a 500-page PDF.

The demo corpus (57 pages) is rendered to HTML, DOCX and PDF by the test suite's writers
(:mod:`tests.helpers.demo_formats`), then read with ``load_corpus`` side by side in one run,
interleaved per repeat (HTML, DOCX, PDF, then each again from a warm conversion cache):

- cold: every file converted (PDF in pages/s, HTML and DOCX in files/s);
- warm: every conversion served from the stage cache (hash the bytes, read the entry);
- Markdown: the original ``.md`` folder read as is, the floor a warm read compares with.

The 500-page PDF (the demo's longest PDF's pages repeated with pypdfium2 up to 500 pages) is
converted in a fresh process: wall time, the resident memory before the conversion (Python, the
imports, the file's bytes) and the peak during it (Linux ``VmHWM`` reset just before).

    python -m benchmarks.bench_conversion [--repeats 3] [--pages 500] [--long-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragexp.data.datasets import demo_paths
from ragexp.data.loaders.corpus import load_corpus, persist_conversions
from ragexp.runtime.stage_cache import StageCache
from tests.helpers.demo_formats import FORMATS, render_corpus

PEAK_SCRIPT = """
import json, sys, time
from pathlib import Path
from ragexp.data.convert import ConvertOptions, converter_for
def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) / 1024
data = Path(sys.argv[1]).read_bytes()
before = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # Linux: the peak (VmHWM) restarts from the current RSS
started = time.perf_counter()
pages = len(converter_for(".pdf").convert(data, ConvertOptions()).page_starts)
print(json.dumps({"seconds": time.perf_counter() - started, "pages": pages, "before_mib": before,
                  "peak_mib": status("VmHWM:")}))
"""


def long_pdf(source: Path, pages: int, target: Path) -> Path:
    """``source``'s pages repeated until the document has ``pages`` pages."""
    import pypdfium2 as pdfium

    template = pdfium.PdfDocument(str(source))
    document = pdfium.PdfDocument.new()
    while len(document) < pages:
        document.import_pages(template, list(range(min(len(template), pages - len(document)))))
    document.save(str(target))
    document.close()
    template.close()
    return target


def timed_read(folder: Path, cache: StageCache | None) -> tuple[float, int, int]:
    """``(seconds, files, pages)`` of one ``load_corpus``; conversions persisted into ``cache``."""
    started = time.perf_counter()
    corpus = load_corpus(folder, cache=cache)
    seconds = time.perf_counter() - started
    if cache is not None:
        persist_conversions(corpus, cache)
    pages = sum(len(doc.page_starts) for doc in corpus.values())
    return seconds, len(corpus), pages


def convert_in_fresh_process(pdf: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(pdf)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--long-only", action="store_true", help="only the long PDF")
    args = parser.parse_args()
    corpus_dir, _ = demo_paths()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        folders = {fmt: render_corpus(corpus_dir, root / fmt, fmt) for fmt in (("pdf",) if args.long_only else FORMATS)}
        print(f"rendered the demo corpus to {', '.join(folders)} in {time.perf_counter() - started:.1f} s")
        rows: dict[str, list[float]] = {}
        for repeat in range(0 if args.long_only else args.repeats):
            cache = StageCache(root / f"cache{repeat}")
            for fmt in FORMATS:  # cold, then warm, per format, interleaved across formats and repeats
                seconds, files, pages = timed_read(folders[fmt], cache)
                rows.setdefault(f"{fmt} cold", []).append((pages if fmt == "pdf" else files) / seconds)
                seconds, files, _ = timed_read(folders[fmt], cache)
                rows.setdefault(f"{fmt} cache hit", []).append(files / seconds)
            seconds, files, _ = timed_read(corpus_dir, None)
            rows.setdefault("markdown (no conversion)", []).append(files / seconds)
        if rows:
            print(f"\n{'read':<26} {'median':>10} {'spread':>22}   (per second; {args.repeats} repeats, interleaved)")
        for name, values in rows.items():
            unit = "pages/s" if name == "pdf cold" else "files/s"
            print(f"{name:<26} {statistics.median(values):>10.1f} {min(values):>10.1f} - {max(values):<10.1f} {unit}")
        pdf = long_pdf(max(folders["pdf"].rglob("*.pdf"), key=lambda p: p.stat().st_size), args.pages, root / "long.pdf")
        for _ in range(max(1, args.repeats)):
            run = convert_in_fresh_process(pdf)
            print(f"\n{run['pages']}-page PDF ({pdf.stat().st_size / 2**20:.1f} MiB): {run['seconds']:.2f} s "
                  f"({run['pages'] / run['seconds']:.0f} pages/s), resident memory {run['before_mib']:.0f} MiB before, "
                  f"peak {run['peak_mib']:.0f} MiB during the conversion (+{run['peak_mib'] - run['before_mib']:.0f} MiB)")


if __name__ == "__main__":
    main()
