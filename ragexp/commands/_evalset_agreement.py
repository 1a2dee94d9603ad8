"""``ragexp evalset agreement A B [--corpus DIR] [--queue FILE --adjudicator NAME] [--span-threshold T]
[--experiment NAME] [--tracking-uri URI] [--no-log]``: how far two annotators of the same questions agree.

Prints Cohen's kappa on answerability and on document relevance (with 95 % intervals), the
evidence overlap F1 and the items they disagree on (:mod:`ragexp.annotation.agreement`);
``--queue FILE --adjudicator NAME`` builds a new eval set FILE from both files to adjudicate on
``ragexp evalset annotate FILE``: what both gave alike settled, every difference queued with both
sides shown and neither preselected (:mod:`ragexp.annotation.adjudication`); unless ``--no-log`` the numbers go into the description
of A's MLflow experiment, where its runs are (:mod:`ragexp.tracking.agreement_note`).
Without ``--corpus`` the files are read as written (:func:`ragexp.annotation.judgments.file_judgments`).
Exit 0, or 2 on unusable input (each one line).
"""

from __future__ import annotations

import argparse
import datetime as dt
import filecmp
import os
from pathlib import Path

from ragexp.data.evalset_schema import MAX_ANNOTATOR, valid_annotator
from ragexp.errors import RagexpInputError

HELP = "agreement of two annotators of the same questions: kappa, evidence overlap, disagreements to adjudicate"
#: Evidence overlap F1 below which an item is a disagreement: one sentence against the same
#: sentence plus the next (F1 0.67) is not one, two different sentences (F1 0) are.
DEFAULT_SPAN_THRESHOLD = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("first", metavar="A", type=Path, help="one annotator's eval set (its MLflow experiment gets the note)")
    parser.add_argument("second", metavar="B", type=Path, help="the other annotator's eval set of the same questions")
    parser.add_argument("--corpus", type=Path, help="corpus folder or corpus .jsonl both resolve against (needed for "
                        "quotes and whole documents, --queue and the default experiment)")
    parser.add_argument("--queue", type=Path, metavar="FILE",
                        help="build eval set FILE (.jsonl, new) from both files to adjudicate: what both gave alike "
                             "settled, each difference queued with both verdicts and neither preselected; then: "
                             "ragexp evalset annotate FILE --corpus DIR")
    parser.add_argument("--adjudicator", metavar="NAME", help="with --queue: who adjudicates (recorded in FILE's header "
                        "with both source files, and as the annotator of the items settled on the page)")
    parser.add_argument("--span-threshold", type=float, default=DEFAULT_SPAN_THRESHOLD, metavar="T",
                        help=f"an item whose evidence overlap F1 is below T is a disagreement (default {DEFAULT_SPAN_THRESHOLD})")
    parser.add_argument("--experiment", help="MLflow experiment to note the agreement in (default: A's, named as a run on A names it)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    parser.add_argument("--no-log", action="store_true", help="print only; write nothing to MLflow")


def _check(args: argparse.Namespace) -> None:
    if not 0.0 <= args.span_threshold <= 1.0:
        raise RagexpInputError("an F1 threshold between 0 and 1", field="--span-threshold")
    for path in (args.first, args.second):
        if not path.is_file():
            raise RagexpInputError("no such file; pass two annotators' eval sets (.jsonl, .yaml or .yml)", file=path)
    if os.path.samefile(args.first, args.second) or filecmp.cmp(args.first, args.second, shallow=False):
        raise RagexpInputError(f"the same file (or the same bytes) as {args.first}; pass the other annotator's file",
                               file=args.second)
    if args.corpus is None and args.queue is not None:
        raise RagexpInputError("needs --corpus DIR: the page shows the passages to judge from it", field="--queue")
    if (args.queue is None) != (args.adjudicator is None):
        raise RagexpInputError("--queue FILE and --adjudicator NAME go together (who adjudicates FILE)",
                               field="--adjudicator" if args.queue is not None else "--queue")
    if args.adjudicator is not None and not valid_annotator(args.adjudicator):
        raise RagexpInputError(f"a name of 1 to {MAX_ANNOTATOR} characters", field="--adjudicator")
    if args.corpus is None and not args.no_log and not args.experiment:
        raise RagexpInputError("needed to note the agreement in A's MLflow experiment, which is named by the fingerprint of "
                               "its resolved evidence; pass --corpus DIR, --experiment NAME or --no-log", field="--corpus")
    if args.queue is not None:
        if args.queue.suffix.lower() != ".jsonl":
            raise RagexpInputError("the adjudication queue goes into a .jsonl eval set (the annotation page's format)",
                                   file=args.queue, field="--queue")
        if any(args.queue.exists() and os.path.samefile(args.queue, path) for path in (args.first, args.second)):
            raise RagexpInputError("queueing into an annotator's file would rewrite it and anchor the adjudication on "
                                   "its verdicts; name a new file", file=args.queue, field="--queue")


def names_of(judgments, paths: tuple[Path, Path]) -> tuple[str, str]:
    """The annotators as the report names them: the one ``annotator`` each file's items record, else
    the file name without suffix; the paths when the two are the same."""
    names = tuple(j.annotator or path.stem for j, path in zip(judgments, paths))
    return names if names[0] != names[1] else (str(paths[0]), str(paths[1]))


def run(args: argparse.Namespace) -> int:
    _check(args)
    from ragexp.annotation.agreement import agreement
    from ragexp.annotation.judgments import corpus_judgments, file_judgments, paired_judgments

    first = second = corpus = None
    if args.corpus is not None:
        from ragexp.data.loaders.corpus import load_corpus
        from ragexp.data.loaders.evalset import load_evalset

        corpus = load_corpus(args.corpus)
        first, second = load_evalset(args.first, corpus), load_evalset(args.second, corpus)
        judgments = corpus_judgments(first, corpus), corpus_judgments(second, corpus)
    else:
        judgments = file_judgments(args.first), file_judgments(args.second)
    paths = (args.first, args.second)
    names = names_of(judgments, paths)
    result = agreement(paired_judgments(*judgments), names, args.span_threshold)
    print(result.render(*(name if name == str(path) else f"{name} ({path})" for name, path in zip(names, paths))))
    if args.queue is not None:
        from ragexp.annotation.adjudication import queue_adjudication, source_record
        from ragexp.annotation.session import Session

        items = ({item.id: item for item in first}, {item.id: item for item in second})
        sources = tuple(source_record(path, j.annotator) for path, j in zip(paths, judgments))
        session = Session(args.queue)
        session.corpus = lambda: corpus  # the settled items' documents recorded as they read now
        q = queue_adjudication(session, result, items, names, corpus, args.adjudicator, sources,
                               first.name or args.first.stem)
        print(f"{args.queue}: {q.settled} items both gave alike (settled), {q.disagreements} disagreements and "
              f"{q.differing} smaller differences queued ({q.units} passages to judge, neither side preselected)"
              + (f", {q.already} queued before" if q.already else "")
              + f"; adjudicate with: ragexp evalset annotate {args.queue} --corpus {args.corpus}")
    if not args.no_log:
        _note(args, result, names, corpus, first)
    return 0


def _note(args: argparse.Namespace, result, names: tuple[str, str], corpus, evalset) -> None:
    from ragexp.config.machine import default_tracking_uri
    from ragexp.tracking import store
    from ragexp.tracking.agreement_note import write_note
    from ragexp.tracking.experiments import describe_once, experiment_name

    uri = args.tracking_uri or default_tracking_uri()
    client = store.connect(uri)
    name = experiment_name(args.experiment, evalset)
    experiment_id = store.ensure_experiment(client, name)
    if not args.experiment:
        describe_once(client, experiment_id, corpus, evalset)  # a run on A finds its experiment described
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write_note(client, experiment_id, result, names, when)
    print(f"noted in the description of MLflow experiment {name!r} at {uri}")
