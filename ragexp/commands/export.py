"""``ragexp export``: a run's ranking and derived relevance in TREC format.

Run file lines ``qid Q0 unit_id rank score ragexp``; qrels lines ``qid 0 unit_id grade``. Scores
are written so trec_eval's ordering (score desc, id desc on ties) reproduces ragexp's ranks, so
``trec_eval -m all_trec QRELS RUN`` or ranx reproduce ragexp's metrics. TREC fields are separated
by whitespace, so an id holding whitespace (a document id with a newline or a space) is refused,
named, before either file is written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ragexp.commands._runs import add_tracking_argument, load_results, run_or_file_ref
from ragexp.errors import RagexpInputError
from ragexp.metrics.ranking import doc_level
from ragexp.runtime.atomic_file import atomic_write

_WHITESPACE = re.compile(r"\s")


def _check_trec_id(value: str, field: str, source: str) -> None:
    if not value or _WHITESPACE.search(value):
        raise RagexpInputError(f"the id {value!r} is empty or holds whitespace, which would break the TREC lines "
                               "(fields are whitespace-separated); rename it in the corpus or eval set", file=source,
                               field=field)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", type=run_or_file_ref,
                        help="MLflow run id (or a unique prefix of one), or a ragexp_results.json file")
    parser.add_argument("--run", required=True, type=Path, metavar="FILE", help="where to write the TREC run file")
    parser.add_argument("--qrels", required=True, type=Path, metavar="FILE", help="where to write the TREC qrels file")
    parser.add_argument("--level", choices=("chunk", "doc"), default="chunk", help="chunk ids or documents (best chunk)")
    add_tracking_argument(parser)


def run(args: argparse.Namespace) -> int:
    results = load_results(args.run_id, args.tracking_uri)
    run_lines, qrels_lines = [], []
    for row_index, row in enumerate(results.per_query):
        qid, ranking, relevant = row.query_id, list(row.ranking), row.relevant
        if args.level == "doc":  # the run's own chunk ranking collapsed to documents, as doc_* metrics are
            ranking = doc_level(ranking)
            relevant = row.doc_relevant
        for field, value in (("query_id", qid), *(("ranking", unit) for unit, _ in ranking), *(("relevant", unit) for unit in relevant)):
            _check_trec_id(str(value), f"per_query[{row_index}].{field}", args.run_id)
        for rank, (unit, score) in enumerate(ranking, start=1):
            run_lines.append(f"{qid} Q0 {unit} {rank} {score:.10g} ragexp")
        for unit, grade in sorted(relevant.items()):
            qrels_lines.append(f"{qid} 0 {unit} {grade}")
    for path, lines in ((args.run, run_lines), (args.qrels, qrels_lines)):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, "\n".join(lines) + "\n")
    print(f"wrote {len(run_lines)} run lines to {args.run} and {len(qrels_lines)} qrels lines to {args.qrels}")
    return 0
