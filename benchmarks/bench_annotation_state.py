"""``GET /api/state`` of the annotation page: one listing of the corpus folder per request against
one per entry (what the page did before the listing was shared across a request's entries).

A temporary corpus of 1,000 Markdown documents (about 1 KB each) and an eval set of 150 entries,
each with one evidence span. ``per entry``: every entry's view lists the folder again (path, size,
mtime of all 1,000 files) to check the corpus did not change; ``per request``: the request lists it
once and every entry's view uses that read. Both run in one process, interleaved round by round;
the table prints each round, the medians and the folder listings per request.

Run: ``python -m benchmarks.bench_annotation_state [--docs 1000] [--entries 150] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragexp.annotation import live_corpus  # noqa: E402
from ragexp.annotation.coverage import coverage  # noqa: E402
from ragexp.annotation.live_corpus import LiveCorpus  # noqa: E402
from ragexp.annotation.pool import Pooler  # noqa: E402
from ragexp.annotation.server import Annotation  # noqa: E402
from ragexp.annotation.session import Session  # noqa: E402

SENTENCE = "Deliveries are retried with exponential backoff for 24 hours before they are marked failed. "


def write_corpus(root: Path, n_docs: int) -> None:
    root.mkdir()
    for i in range(n_docs):
        (root / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n## Section {i % 7}\n\n{SENTENCE * 10}\n", encoding="utf-8")


def write_evalset(path: Path, n_entries: int) -> None:
    """``n_entries`` queued questions, each with one span of its own document as evidence."""
    rows = [{"id": f"q{i:03d}", "query": f"How long are deliveries of document {i} retried?", "source": "log",
             "evidence": [{"doc_id": f"doc{i:04d}", "start": 0, "end": 10, "quote": "# Document"}]} for i in range(n_entries)]
    Session(path).queue(rows, "bench")


class Listings:
    """Counts the corpus folder listings (``live_corpus._snapshot`` calls)."""

    def __init__(self) -> None:
        self.count = 0
        self._listing = live_corpus._snapshot

    def __enter__(self):
        def counted(root):
            self.count += 1
            return self._listing(root)

        live_corpus._snapshot = counted
        return self

    def __exit__(self, *exc) -> None:
        live_corpus._snapshot = self._listing


def per_entry(annotation: Annotation) -> dict:
    """The state with the corpus listed again for every entry (the earlier page)."""
    with annotation.session.lock:
        entries = [annotation.view(entry) for entry in annotation.session.entries]
        return {"entries": entries, "coverage": coverage(annotation.session.items(), annotation.chunk_map())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.chdir(root)
        write_corpus(root / "corpus", args.docs)
        write_evalset(root / "evalset.jsonl", args.entries)
        annotation = Annotation(Session(root / "evalset.jsonl"), LiveCorpus(root / "corpus"), Pooler(["bm25"], depth=3))
        annotation.state()  # the chunk map built once, as a running page has it
        times: dict[str, list[float]] = {"per entry": [], "per request": []}
        listings: dict[str, int] = {}
        print(f"GET /api/state: {args.docs} documents, {args.entries} entries, {args.rounds} interleaved rounds")
        print(f"{'round':>5}  {'per entry (s)':>13}  {'per request (s)':>15}")
        for round_no in range(1, args.rounds + 1):
            for name, call in (("per entry", per_entry), ("per request", Annotation.state)):
                with Listings() as counted:
                    start = time.perf_counter()
                    reply = call(annotation)
                    times[name].append(time.perf_counter() - start)
                listings[name] = counted.count
                assert len(reply["entries"]) == args.entries
            print(f"{round_no:>5}  {times['per entry'][-1]:>13.3f}  {times['per request'][-1]:>15.3f}")
        before, after = (statistics.median(times[name]) for name in ("per entry", "per request"))
        print(f"median  {before:>12.3f}  {after:>15.3f}   ({before / after:.1f}x)")
        print(f"folder listings per request: per entry {listings['per entry']}, per request {listings['per request']}")


if __name__ == "__main__":
    main()
