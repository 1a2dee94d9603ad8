"""Judge calibration: how often does the judge agree with a human on claim support?

Labels CSV (UTF-8, header row)
------------------------------
``id, context_doc_id, context, claim, human_label, note`` and optionally ``judge_label``,
``judge_score``, ``judge_raw``. Labels are ``supported`` or ``not_supported``; an empty
``human_label`` is a row not yet reviewed, an empty ``judge_label`` a judge failure. Both kinds
of row are left out of the agreement and counted.

Agreement over the n rows that carry both labels::

    accuracy = (1/n) * sum_i [human_i == judge_i]
    p_e      = sum_l (n_human(l)/n) * (n_judge(l)/n)
    kappa    = (accuracy - p_e) / (1 - p_e)           (Cohen, 1960)

Kappa is undefined (``None``) when ``p_e == 1`` (both raters used one and the same label).
The confusion matrix is ``confusion[human_label][judge_label] = count``.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ragexp.errors import RagexpInputError
from ragexp.stored.limits import read_text

SUPPORTED = "supported"
NOT_SUPPORTED = "not_supported"
LABELS = (SUPPORTED, NOT_SUPPORTED)
REQUIRED_COLUMNS = ("id", "context", "claim", "human_label")


@dataclass
class LabelledClaim:
    id: str
    context: str
    claim: str
    human_label: str = ""
    context_doc_id: str = ""
    note: str = ""
    judge_label: str = ""
    judge_score: str = ""
    judge_raw: str = ""


COLUMNS = ("id", "context_doc_id", "context", "claim", "human_label", "note", "judge_label", "judge_score", "judge_raw")


def label_of(supported: bool | None) -> str:
    """The CSV label of a verdict: ``supported``, ``not_supported`` or ``""`` (judge failure)."""
    if supported is None:
        return ""
    return SUPPORTED if supported else NOT_SUPPORTED


#: A labels CSV holds a few thousand hand-labelled claims at most; larger is not one.
MAX_LABELS_BYTES = 64 * 1024 * 1024


def read_labels(path: str | Path) -> list[LabelledClaim]:
    """Read and validate a labels CSV; errors name the file, line and column."""
    path = Path(path)
    try:  # a regular file of bounded size (a folder, /dev/zero or a FIFO is one line), strict UTF-8
        handle = io.StringIO(read_text(path, max_bytes=MAX_LABELS_BYTES), newline="")
    except RagexpInputError as err:
        raise RagexpInputError("no such labels file" if err.message == "no such file" else err.message, file=path,
                               line=err.line) from None
    known = {f.name for f in fields(LabelledClaim)}
    rows: list[LabelledClaim] = []
    with handle:
        reader = csv.DictReader(handle)
        header = csv_header(reader, path)
        for column in REQUIRED_COLUMNS:
            if column not in header:
                raise RagexpInputError(f"missing column (have: {', '.join(header) or 'none'})", file=path, line=1, field=column)
        for record in csv_records(reader, path):
            line = reader.line_num
            values = {k: v.strip() for k, v in record.items() if k in known}
            for column in ("human_label", "judge_label"):
                if values.get(column, "") not in ("", *LABELS):
                    raise RagexpInputError(
                        f"{values[column]!r} is not a label (expected {' or '.join(LABELS)}, or empty)",
                        file=path, line=line, field=column,
                    )
            for column in ("id", "context", "claim"):
                if not values.get(column):
                    raise RagexpInputError("empty value", file=path, line=line, field=column)
            rows.append(LabelledClaim(**values))
    return rows


#: First characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list:
#: ``=``, ``+``, ``-``, ``@``, tab, carriage return), and the quote that marks a cell as text.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"


def spreadsheet_cell(value: str) -> str:
    """``value`` as a cell a spreadsheet shows as text: ``'`` before a value that starts with a
    :data:`FORMULA_START` character or with ``'`` itself (so :func:`cell_value` takes exactly
    one off and every value comes back as it was)."""
    return TEXT_MARK + value if value.startswith((*FORMULA_START, TEXT_MARK)) else value


def cell_value(cell: str) -> str:
    """The value of a cell :func:`spreadsheet_cell` wrote (one leading ``'`` taken off). A
    spreadsheet that saves a cell typed as ``'=x`` writes ``=x``, which reads as ``=x``."""
    return cell.removeprefix(TEXT_MARK)


def labels_csv(rows: Iterable[object], columns: Sequence[str] = COLUMNS) -> str:
    """The CSV text of dataclass ``rows`` with a header of ``columns``, one row per item in that
    column order; every field of a row must be one of ``columns`` (else ``ValueError``). The one
    writer of a person's label files: claims (:data:`COLUMNS`, the format :func:`read_labels`
    reads) and whole answers (:mod:`ragexp.judging.answer_labels`). The csv module's ``excel``
    dialect: CRLF row ends, a cell quoted only when it holds a comma, quote or line break, quotes
    doubled; every value through :func:`spreadsheet_cell` (an answer starting with ``=`` is no
    formula when the file is opened in a spreadsheet), which the readers undo with :func:`cell_value`."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows({key: spreadsheet_cell(value) if isinstance(value, str) else value
                      for key, value in asdict(row).items()} for row in rows)
    return out.getvalue()


def csv_header(reader: csv.DictReader, path: Path) -> list[str]:
    """The header row of ``reader`` (refused in one line like :func:`csv_records`' rows)."""
    try:
        return list(reader.fieldnames or [])
    except csv.Error as err:
        raise RagexpInputError(f"not a readable CSV header ({err})", file=path, line=reader.line_num + 1) from None


def csv_records(reader: csv.DictReader, path: Path) -> Iterator[dict[str, str]]:
    """Each record of ``reader`` with every cell through :func:`cell_value`; a malformed row or a
    cell longer than the csv module's limit (131,072 characters) is one line naming the file and line."""
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise RagexpInputError(f"not a readable CSV row ({err}); a cell holds at most "
                                   f"{csv.field_size_limit():,} characters", file=path, line=reader.line_num + 1) from None
        yield {key: cell_value(value or "") for key, value in record.items() if isinstance(key, str)}


def write_labels(path: str | Path, rows: Iterable[LabelledClaim]) -> Path:
    """Write rows in :data:`COLUMNS` order (the format :func:`read_labels` reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(labels_csv(rows))
    return path


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters over the same items; ``None`` when chance agreement is 1."""
    if len(first) != len(second):
        raise ValueError("raters must label the same items")
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second)) / n
    first_counts, second_counts = Counter(first), Counter(second)
    expected = sum(first_counts[label] * second_counts[label] for label in first_counts) / (n * n)
    if expected == 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


@dataclass(frozen=True)
class AgreementReport:
    n: int
    accuracy: float | None
    kappa: float | None
    confusion: dict[str, dict[str, int]]
    n_unlabelled: int
    n_judge_failures: int

    def metrics(self) -> dict[str, float]:
        """Flat numbers for MLflow (undefined values left out)."""
        out = {
            "judge_agreement_n": float(self.n),
            "judge_agreement_unlabelled": float(self.n_unlabelled),
            "judge_agreement_judge_failures": float(self.n_judge_failures),
        }
        if self.accuracy is not None:
            out["judge_agreement_accuracy"] = self.accuracy
        if self.kappa is not None:
            out["judge_agreement_kappa"] = self.kappa
        for human in LABELS:
            for judge in LABELS:
                out[f"judge_confusion_human_{human}_judge_{judge}"] = float(self.confusion[human][judge])
        return out

    def render(self) -> str:
        def fmt(value: float | None) -> str:
            return "undefined" if value is None else f"{value:.3f}"

        width = max(len(label) for label in LABELS) + 2
        lines = [
            f"claims compared: {self.n}  (not yet labelled by a human: {self.n_unlabelled}, "
            f"judge failures: {self.n_judge_failures})",
            f"accuracy: {fmt(self.accuracy)}",
            f"Cohen's kappa: {fmt(self.kappa)}",
            "confusion (rows: human, columns: judge):",
            " " * width + "".join(label.rjust(width) for label in LABELS),
        ]
        for human in LABELS:
            lines.append(human.ljust(width) + "".join(str(self.confusion[human][j]).rjust(width) for j in LABELS))
        return "\n".join(lines)


def agreement(rows: Iterable[LabelledClaim]) -> AgreementReport:
    """Accuracy, kappa and confusion of ``judge_label`` against ``human_label``."""
    rows = list(rows)
    labelled = [r for r in rows if r.human_label]
    compared = [r for r in labelled if r.judge_label]
    human = [r.human_label for r in compared]
    judge = [r.judge_label for r in compared]
    confusion = {h: {j: 0 for j in LABELS} for h in LABELS}
    for h, j in zip(human, judge):
        confusion[h][j] += 1
    accuracy = sum(h == j for h, j in zip(human, judge)) / len(compared) if compared else None
    return AgreementReport(
        n=len(compared),
        accuracy=accuracy,
        kappa=cohen_kappa(human, judge),
        confusion=confusion,
        n_unlabelled=len(rows) - len(labelled),
        n_judge_failures=len(labelled) - len(compared),
    )
