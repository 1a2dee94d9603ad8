"""``ragexp evalset``: check an eval set against a corpus.

``ragexp evalset lint EVALSET --corpus PATH [--format text|json] [--keep-html-boilerplate] [--strict]``
    Report every problem at once (see :mod:`ragexp.data.lint`), corpus files skipped or converted to
    empty text included. Exit 0 clean (warnings allowed), 1 on lint errors, 2 on unusable input.
``ragexp evalset resolve EVALSET --corpus PATH [--output FILE]``
    Load the eval set exactly as a run does (the first error stops it, exit 2) and write it back
    with every evidence resolved to a whole document or an explicit ``start``/``end`` span with the
    ``quote`` it reads, the header recording each gold document's text — e.g. to turn
    ``gold_chunk_ids`` into spans before the chunking they refer to is changed. Bare spans take
    the text this corpus holds there as what they read, and the command says so (right only on
    the corpus version they were marked on).
``ragexp evalset reanchor EVALSET --corpus NEW [--old-corpus OLD] [--output FILE] [--report FILE]``
    The gold moved to a new corpus version with the black box's locator, as a new eval-set version
    with its lineage, and a report: moved, re-found fuzzily, changed and vanished (for a person,
    in the annotation page's stale view) (:mod:`ragexp.commands._evalset_reanchor`).
``ragexp evalset queries LOG... --sample N --out FILE [--field F] [--threshold T]``
    Candidate questions from query logs (:mod:`ragexp.candidates.from_logs`): counts of every step
    printed, the candidates written as JSONL. Exit 0, or 2 on unusable input.
``ragexp evalset diff OLD NEW --corpus PATH [--format text|json]``
    Items added, removed and changed, both fingerprints, whether runs on the two are comparable
    (:mod:`ragexp.data.evalset_diff`). Exit 0 when nothing changed, 1 when something did, 2 on
    unusable input (as ``diff``).
``ragexp evalset draft --corpus PATH --per-category N [--out QUEUE]``
    Draft questions with evidence from a language model (:mod:`ragexp.candidates.drafts`), appended
    to a queue file for review, never to an eval set.
``ragexp evalset annotate EVALSET --corpus PATH [--queries FILE] [--port P] [--from-run RUN_ID [--failures]]``
    The annotation page on 127.0.0.1 (:mod:`ragexp.annotation`): pooled candidates, evidence spans
    selected with the mouse, judged negatives, coverage; every change saved at once.
``ragexp evalset agreement A B [--corpus PATH] [--queue FILE] [--no-log]``
    Two annotators of the same questions: kappa with intervals, evidence overlap, the items they
    disagree on (queued for adjudication with ``--queue``), noted in A's MLflow experiment.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ragexp.commands import (
    _evalset_agreement,
    _evalset_annotate,
    _evalset_diff,
    _evalset_draft,
    _evalset_queries,
    _evalset_reanchor,
)
from ragexp.data.lint import lint_evalset
from ragexp.data.loaders.corpus import load_corpus
from ragexp.data.loaders.evalset import evalset_to_jsonl, load_evalset

#: Sub-actions that live in their own modules (``add_arguments(parser)``, ``run(args)``, ``HELP``).
EVALSET_TOOLS = {"queries": _evalset_queries, "diff": _evalset_diff, "draft": _evalset_draft,
                 "annotate": _evalset_annotate, "agreement": _evalset_agreement, "reanchor": _evalset_reanchor}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="evalset_action", metavar="ACTION", required=True)
    lint = actions.add_parser("lint", help="report stale gold, duplicates, missing answers, category coverage")
    resolve = actions.add_parser("resolve", help="load strictly and write the eval set with evidence as spans")
    for action in (lint, resolve):
        action.add_argument("evalset", metavar="EVALSET", help="eval set file (.jsonl, .yaml or .yml)")
        action.add_argument("--corpus", required=True, help="corpus folder or corpus .jsonl the gold refers to")
    lint.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    lint.add_argument("--keep-html-boilerplate", action="store_true",
                      help="keep navigation, headers and footers of HTML documents (as dataset.html_remove_boilerplate=false)")
    lint.add_argument("--strict", action="store_true",
                      help="a corpus file skipped or converted to empty text is an error (as dataset.strict=true)")
    resolve.add_argument("--output", "-o", type=Path, help="write here instead of standard output")

    for name, module in EVALSET_TOOLS.items():
        module.add_arguments(actions.add_parser(name, help=module.HELP, description=module.HELP))

def run(args: argparse.Namespace) -> int:
    if args.evalset_action in EVALSET_TOOLS:
        return EVALSET_TOOLS[args.evalset_action].run(args)
    if args.evalset_action == "lint":
        report = lint_evalset(args.evalset, args.corpus, html_remove_boilerplate=not args.keep_html_boilerplate,
                              strict=args.strict)
        text = json.dumps(report.to_dict(), indent=2) if args.format == "json" else report.render_text()
        print(text)
        return report.exit_code
    corpus = load_corpus(args.corpus)
    evalset = load_evalset(args.evalset, corpus)
    text = evalset_to_jsonl(evalset, corpus)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    n_spans = sum(e.is_span for item in evalset for e in item.evidence)
    n_docs = sum(not e.is_span for item in evalset for e in item.evidence)
    print(f"resolved {len(evalset)} items: {n_spans} span and {n_docs} whole-document evidence", file=sys.stderr)
    if evalset.meta["gold"]["unverifiable"]:
        print(f"warning: {evalset.meta['gold']['unverifiable']} bare span(s) or chunk id(s) were given the text "
              f"{args.corpus} holds there as the text they read: right only if they were marked on this corpus "
              "version; else resolve them on that one, or ragexp evalset reanchor --old-corpus", file=sys.stderr)
    for warning in evalset.meta.get("warnings", []):
        if warning.startswith("gold moved"):
            print(f"warning: {warning}", file=sys.stderr)
    return 0

