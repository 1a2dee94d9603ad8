"""A person's failure class for whole answers: the answer-labels CSV, with its one reader and writer.

Claims are labelled one by one (:mod:`ragexp.judging.calibration.labels`); whether an answer is a
*generation failure* is a verdict on the whole answer (:mod:`ragexp.judging.failure`: the gold
reached the generator and the answer is still refused, wrong or unfaithful), so it gets its own
file. ``ragexp judge sample RUN_ID --answers -n 20 --out answers.csv`` writes one (drawn across the
run's classes); a person fills ``human_class``; ``ragexp judge ppi RUN_ID --answer-labels
answers.csv`` corrects the run's ``generation_failure_rate`` and ``ok_rate`` by it
(:mod:`ragexp.evaluation.corrected`).

CSV (UTF-8, header row): ``id, query, answer, judge_class, human_class, note``.

- ``id``: ``<run id>/<query id>`` or ``<query id>``;
- ``answer``: the run's answer, verbatim (a row whose answer is not the run's is not its label);
- ``judge_class``: the run's class, ``human_class``: the person's, each one of :data:`CLASSES`
  (``human_class`` empty: not labelled yet).

The reader is the gate for this file (it may come from a spreadsheet or another machine): bytes
through :func:`ragexp.stored.limits.read_text` (at most :data:`MAX_BYTES`), strict UTF-8, the
required columns present, every class one of :data:`CLASSES`; errors name the file, line and column.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.judging.calibration.labels import csv_header, csv_records, labels_csv
from ragexp.judging.failure import ANSWERABLE_CLASSES
from ragexp.runtime.atomic_file import atomic_write
from ragexp.stored.limits import read_text

#: The classes of an answerable item with an answer: the ones its failure rates are shares of.
CLASSES = tuple(c.value for c in ANSWERABLE_CLASSES)
COLUMNS = ("id", "query", "answer", "judge_class", "human_class", "note")
REQUIRED = ("id", "answer", "human_class")
#: A few thousand labelled answers at most; larger is not an answer-labels file.
MAX_BYTES = 64 * 1024 * 1024


@dataclass
class AnswerLabel:
    id: str
    answer: str
    query: str = ""
    judge_class: str = ""
    human_class: str = ""
    note: str = ""


def read_answer_labels(path: str | Path) -> list[AnswerLabel]:
    """The rows of an answer-labels CSV (module docstring)."""
    path = Path(path)
    try:
        handle = io.StringIO(read_text(path, max_bytes=MAX_BYTES), newline="")
    except RagexpInputError as err:
        raise RagexpInputError("no such answer-labels file" if err.message == "no such file" else err.message,
                               file=path, line=err.line) from None
    known = {f.name for f in fields(AnswerLabel)}
    rows = []
    reader = csv.DictReader(handle)
    header = csv_header(reader, path)
    for column in REQUIRED:
        if column not in header:
            raise RagexpInputError(f"missing column (have: {', '.join(header) or 'none'})", file=path, line=1, field=column)
    for record in csv_records(reader, path):
        values = {k: v.strip() if k != "answer" else v for k, v in record.items() if k in known}
        for column in ("judge_class", "human_class"):
            if values.get(column, "") not in ("", *CLASSES):
                raise RagexpInputError(f"{values[column]!r} is not a class (expected {', '.join(CLASSES)}, or empty)",
                                       file=path, line=reader.line_num, field=column)
        if not values.get("id"):
            raise RagexpInputError("empty value", file=path, line=reader.line_num, field="id")
        rows.append(AnswerLabel(**values))
    return rows


def write_answer_labels(path: str | Path, rows: Iterable[AnswerLabel]) -> Path:
    """Write ``rows`` in :data:`COLUMNS` order, whole or not at all (the CSV text is
    :func:`ragexp.judging.calibration.labels.labels_csv`'s, the claim labels' writer)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, labels_csv(rows, COLUMNS))
    return path
