"""A held-out labelled set for claim judges: SciFact (claim, abstract) pairs labelled by hand.

``benchmarks/data/scifact_judge_labels.csv`` holds ids and labels only — ``claim_id, doc_id,
label, source`` with ``label`` in ``SUPPORT | CONTRADICT | NEI`` and ``source`` a draw stream of
:mod:`benchmarks.scifact_judge_draw` — and the texts are joined from a BEIR SciFact folder at run
time (the data is never copied into the repo). How the pairs were drawn and labelled:
``benchmarks/data/README.md``.

Each pair becomes one row of ragexp's labels CSV (:mod:`ragexp.judging.calibration.labels`):
``id = "scifact/<claim_id>/<doc_id>"``, ``context = title + "\\n" + text`` of the abstract,
``claim`` = the claim text, ``human_label = supported`` for ``SUPPORT`` and ``not_supported`` for
``CONTRADICT`` and ``NEI`` alike, ``note`` = the three-way label.

Run ``python -m benchmarks.scifact_judge_set --scifact DIR --out FILE.csv``, then
``ragexp judge agreement FILE.csv --judge lexical``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from benchmarks.scifact_judge_draw import STREAMS, SciFactClaims, load_claims
from ragexp.data.loaders.jsonl import read_text
from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError
from ragexp.judging.calibration.labels import (
    NOT_SUPPORTED,
    SUPPORTED,
    LabelledClaim,
    write_labels,
)

LABELS_CSV = Path(__file__).resolve().parent / "data" / "scifact_judge_labels.csv"
COLUMNS = ("claim_id", "doc_id", "label", "source")
HUMAN_LABEL = {"SUPPORT": SUPPORTED, "CONTRADICT": NOT_SUPPORTED, "NEI": NOT_SUPPORTED}


@dataclass(frozen=True)
class JudgePair:
    claim_id: str
    doc_id: str
    label: str
    source: str


def read_pairs(path: str | PathLike[str] = LABELS_CSV) -> list[JudgePair]:
    """The labelled pairs; a bad header, label, source or a repeated (claim, abstract) names its line."""
    path = Path(path)
    if not path.is_file():
        raise RagexpInputError("no such labels file", file=path)
    reader = csv.DictReader(read_text(path).splitlines())
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise RagexpInputError(
            f"header must be {','.join(COLUMNS)}, got {','.join(reader.fieldnames or [])}", file=path, line=1
        )
    pairs: list[JudgePair] = []
    seen: dict[tuple[str, str], int] = {}
    for line, record in enumerate(reader, start=2):
        pair = JudgePair(*(record[column] for column in COLUMNS))
        if pair.label not in HUMAN_LABEL:
            raise RagexpInputError(
                f"{pair.label!r} is not one of {', '.join(HUMAN_LABEL)}", file=path, line=line, field="label"
            )
        if pair.source not in STREAMS:
            raise RagexpInputError(
                f"{pair.source!r} is not one of {', '.join(STREAMS)}", file=path, line=line, field="source"
            )
        key = (pair.claim_id, pair.doc_id)
        if key in seen:
            raise RagexpInputError(f"pair repeats line {seen[key]}", file=path, line=line, field="doc_id")
        seen[key] = line
        pairs.append(pair)
    return pairs


def labelled_claims(
    pairs: list[JudgePair], data: SciFactClaims, labels_path: str | PathLike[str] = LABELS_CSV
) -> list[LabelledClaim]:
    """ragexp labels-CSV rows of ``pairs``, texts from ``data``; an unknown id names its line."""
    rows = []
    for line, pair in enumerate(pairs, start=2):
        if pair.claim_id not in data.claims:
            raise RagexpInputError(
                f"claim {pair.claim_id!r} is not a SciFact qrels claim", file=labels_path, line=line, field="claim_id"
            )
        if pair.doc_id not in data.corpus:
            raise RagexpInputError(
                f"abstract {pair.doc_id!r} is not in corpus.jsonl", file=labels_path, line=line, field="doc_id"
            )
        doc = data.corpus[pair.doc_id]
        rows.append(
            LabelledClaim(
                id=f"scifact/{pair.claim_id}/{pair.doc_id}",
                context=f"{doc.title}\n{doc.text}" if doc.title else doc.text,
                claim=data.claims[pair.claim_id],
                human_label=HUMAN_LABEL[pair.label],
                context_doc_id=pair.doc_id,
                note=pair.label,
            )
        )
    return rows


def judge_set(scifact: str | PathLike[str], labels: str | PathLike[str] = LABELS_CSV) -> list[LabelledClaim]:
    """The labelled set joined with the SciFact folder ``scifact``."""
    return labelled_claims(read_pairs(labels), load_claims(scifact), labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scifact", required=True, type=Path, help="BEIR SciFact folder (corpus.jsonl, queries.jsonl, qrels/)"
    )
    parser.add_argument("--out", required=True, type=Path, help="ragexp labels CSV to write")
    parser.add_argument("--labels", type=Path, default=LABELS_CSV, help="pair labels (default: the shipped set)")
    args = parser.parse_args(argv)
    try:
        rows = judge_set(args.scifact, args.labels)
    except RagexpInputError as err:
        print(f"scifact_judge_set: error: {err}", file=sys.stderr)
        return USAGE_EXIT_CODE
    write_labels(args.out, rows)
    counts = {label: sum(row.note == label for row in rows) for label in HUMAN_LABEL}
    print(f"wrote {len(rows)} rows to {args.out} ({', '.join(f'{n} {label}' for label, n in counts.items())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
