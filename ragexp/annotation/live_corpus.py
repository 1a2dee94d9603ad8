"""The corpus as it is on disk now: re-read when a file under it changes, spans checked against it.

A page may stay open while someone edits the documents. Before every save the folder is scanned
(path, size, modification time of every file); when that differs from the last read, the corpus is
loaded again with the same loaders a run uses (HTML, PDF, DOCX converted; offsets index the
converted text). A span is *current* when ``text[start:end] == quote`` in the current corpus;
anything else is *stale*: the page never moves it, it shows it for a person to re-mark (a run
re-anchors a quote found once elsewhere for itself, and ``ragexp evalset reanchor`` writes the
move; docs/living-evalset.md).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ragexp.data.loaders.corpus import load_corpus
from ragexp.datamodel import Corpus
from ragexp.runtime.stage_cache import StageCache


def _snapshot(root: Path) -> tuple:
    if root.is_file():
        stat = root.stat()
        return ((str(root), stat.st_size, stat.st_mtime_ns),)
    rows = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            rows.append((path, stat.st_size, stat.st_mtime_ns))
    return tuple(rows)


class LiveCorpus:
    """``current()``: the corpus, re-loaded when a file changed since the last read;
    ``generation`` counts the reads (the page compares it to know its documents are outdated)."""

    def __init__(self, root: Path, cache: StageCache | None = None) -> None:
        self.root = Path(root)
        self.cache = cache
        self.lock = threading.Lock()
        self.generation = 0
        self._snapshot = _snapshot(self.root)
        self.corpus: Corpus = load_corpus(self.root, cache=cache)

    def current(self) -> Corpus:
        with self.lock:
            snapshot = _snapshot(self.root)
            if snapshot != self._snapshot:
                self.corpus = load_corpus(self.root, cache=self.cache)
                self._snapshot = snapshot
                self.generation += 1
            return self.corpus


def span_problem(corpus: Corpus, evidence: dict) -> str | None:
    """Why ``evidence`` (an eval-set evidence entry) does not hold in ``corpus``; ``None`` when it
    does. Whole-document evidence needs its document; a span with a quote must read the quote."""
    document = corpus.get(evidence.get("doc_id"))
    if document is None:
        return f"document {evidence.get('doc_id')!r} is no longer in the corpus"
    start, end, quote = evidence.get("start"), evidence.get("end"), evidence.get("quote")
    if start is None:
        if quote is not None and document.text.count(quote) != 1:
            return f"the quote no longer occurs exactly once in {document.id!r}"
        return None
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(document.text)):
        return f"span [{start}, {end}) lies outside {document.id!r} ({len(document.text)} characters now)"
    if quote is not None and document.text[start:end] != quote:
        return f"{document.id!r} changed: [{start}, {end}) no longer reads the quote"
    return None
