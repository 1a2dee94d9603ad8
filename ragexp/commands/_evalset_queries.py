"""``ragexp evalset queries LOG... --sample N --out FILE``: candidate questions from query logs.

Prints the count of every step (:class:`ragexp.candidates.from_logs.ImportReport`), the
near-duplicate threshold and how it was chosen before the embedding starts, and writes the
candidates as JSONL (docs/evalset-format.md, "Candidates and drafts").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragexp.candidates.from_logs import DEFAULT_MAX_DISTINCT
from ragexp.candidates.log_reader import FORMATS
from ragexp.candidates.query_encoder import DEFAULT_MODEL

HELP = "candidate questions from query logs: dedup, personal-data screen, stratified sample"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", metavar="LOG", nargs="+", type=Path, help="query logs: one query a line, .jsonl, .csv or .tsv; .gz too")
    parser.add_argument("--sample", type=int, required=True, metavar="N", help="how many candidates to draw")
    parser.add_argument("--out", type=Path, required=True, help="candidates file to write (JSONL)")
    parser.add_argument("--field", help="JSONL key (dots for nested keys) or CSV column holding the query (default: query)")
    parser.add_argument("--format", dest="log_format", choices=FORMATS, help="log format (default: from the file suffix)")
    parser.add_argument("--threshold", type=float, help="near-duplicate cosine (default: chosen on ragexp's labelled pairs)")
    parser.add_argument("--max-distinct", type=int, default=DEFAULT_MAX_DISTINCT,
                        help=f"embed at most this many distinct queries (default {DEFAULT_MAX_DISTINCT:,})")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"sentence-transformers model (default {DEFAULT_MODEL})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws and the clustering (default 0)")


def run(args: argparse.Namespace) -> int:
    from ragexp.candidates.from_logs import import_queries
    from ragexp.candidates.query_encoder import QueryEncoder

    report = import_queries(args.logs, args.sample, args.out, encode=QueryEncoder(args.model), model_name=args.model,
                            field_name=args.field, fmt=args.log_format, threshold=args.threshold,
                            max_distinct=args.max_distinct, seed=args.seed, announce=lambda line: print(line, flush=True))
    print(f"wrote {report.sampled} candidates to {args.out}")
    return 0
