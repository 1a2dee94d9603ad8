"""The 43 held demo answer claims with and without the lines that copy a context label.

``benchmarks/data/demo_answer_claims.csv`` holds the claims the local judge split from the demo
run's answers to q001-q024 before issue #41, each with its context. Since #41 a run takes the lines
of an answer that copy a label line out before claims are split
(:func:`ragexp.data.context.strip_label_copies`), so such a claim is never judged. This script
writes the claims a run now judges (each claim is a line of its answer: the claim is dropped when
``strip_label_copies(claim, context)`` removes it) and says which claims went, with their hand
labels, so no supported claim can vanish unnoticed. The judges' agreement on both files comes from
the command the docs quote (``ragexp judge agreement FILE --judge local --method pmi`` and
``--judge lexical``).

Run: ``python -m benchmarks.held_claims_labels OUT.csv``
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from ragexp.data.context import strip_label_copies
from ragexp.judging.calibration.labels import read_labels, write_labels

HELD = Path(__file__).resolve().parent / "data" / "demo_answer_claims.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the claims a run judges now (labels CSV)")
    args = parser.parse_args()
    rows = read_labels(HELD)
    kept = [row for row in rows if strip_label_copies(row.claim, row.context)[1] == 0]
    removed = [row for row in rows if row not in kept]
    write_labels(args.out, kept)
    print(f"{len(rows)} held claims, {len(removed)} copy a label line and are no longer judged; {len(kept)} kept -> {args.out}")
    print("removed, by hand label:", dict(Counter(row.human_label for row in removed)))
    for row in removed:
        print(f"  {row.id} [{row.human_label}] {row.claim!r}")
    print("kept, by hand label:", dict(Counter(row.human_label for row in kept)))


if __name__ == "__main__":
    main()
