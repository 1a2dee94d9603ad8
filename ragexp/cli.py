"""The ``ragexp`` command: a thin dispatcher.

``ragexp run ...`` hands its arguments to the Hydra app (so ``-m`` and overrides work as in any
Hydra app); every other sub-command lives in ``ragexp.commands.<name>`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Bad input raises
:class:`ragexp.errors.RagexpInputError`, printed as one line with exit code 2.

Every command's grammar is exact: no parser takes a prefix of an option (argparse's
``allow_abbrev`` is switched off on every parser and sub-parser, :func:`exact`), and ``ragexp run``
is parsed by ragexp's own grammar (:mod:`ragexp.config.command_line`), not by Hydra's argparse.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError
from ragexp.runtime import terminal

DESCRIPTION = (
    "ragexp: a declarative experiment runner for RAG pipelines. Sweep chunking x retrieval x reranker x k\n"
    "(Hydra overrides), score every variant on one fixed eval set, log it to MLflow, compare, gate, reproduce."
)
#: Examples shown by ``ragexp COMMAND --help`` (and, the first of each, by ``ragexp --help``).
EXAMPLES = {
    "run": ["ragexp run -m chunking=fixed,recursive,markdown retrieval=bm25,dense,hybrid_rrf",
            "ragexp run retrieval=bm25 chunking=recursive chunking.size=256 eval.ks=[1,3,5,10]",
            "ragexp run --help    (config groups and options; Hydra's own flags: ragexp run --hydra-help)"],
    "evalset": ["ragexp evalset lint my_evalset.jsonl --corpus my_docs/",
                "ragexp evalset resolve my_evalset.jsonl --corpus my_docs/ -o resolved.jsonl",
                "ragexp evalset queries logs/search.jsonl.gz --field q --sample 100 --out candidates.jsonl",
                "ragexp evalset diff evalset_v1.jsonl evalset_v2.jsonl --corpus my_docs/",
                "ragexp evalset draft --corpus my_docs/ --per-category 5 --out drafts.jsonl",
                "ragexp evalset annotate my_evalset.jsonl --corpus my_docs/ --queries candidates.jsonl",
                "ragexp evalset annotate my_evalset.jsonl --corpus my_docs/ --from-run RUN_ID --failures",
                "ragexp evalset agreement alice.jsonl bob.jsonl --corpus my_docs/ --queue adjudicated.jsonl"],
    "reproduce": ["ragexp reproduce RUN_ID",
                  "ragexp reproduce RUN_ID --tracking-uri sqlite:////new/place/mlflow.db --artifacts /new/place/mlruns",
                  "ragexp reproduce RUN_ID --allow-endpoint http://localhost:11434/v1=OLLAMA_KEY"],
    "compare": ["ragexp compare",
                "ragexp compare --sort hit_rate_at_5 --metrics hit_rate_at_5,mrr,ndcg_at_5,doc_ndcg_at_10",
                "ragexp compare --by-tag hit_rate_at_5",
                "ragexp compare --by-source hit_rate_at_5",
                "ragexp compare RUN_A RUN_B"],
    "export": ["ragexp export RUN_ID --run run.trec --qrels qrels.trec",
               "ragexp export ragexp_results.json --run run.trec --qrels qrels.trec --level doc"],
    "ui": ["ragexp ui", "ragexp ui --port 5001 --tracking-uri sqlite:////path/to/mlflow.db"],
    "gate": ["ragexp gate --baseline RUN_A --candidate RUN_B",
             "ragexp gate --baseline base.json --candidate cand.json --format markdown"],
    "judge": ["ragexp judge review RUN_ID -n 20 --labels judge_labels.csv",
              "ragexp judge sample RUN_ID -n 20 --out verdicts.csv",
              "ragexp judge agreement verdicts.csv --judge lexical"],
    "upload": ["ragexp upload multirun/2026-12-02/10-00-00-4242/3"],
    "traces": ["ragexp traces RUN_ID", "ragexp traces RUN_A RUN_B --tracking-uri sqlite:////path/to/mlflow.db"],
}

COMMANDS = {
    "evalset": "build and inspect eval sets (lint, resolve, queries from logs, diff, draft, annotate, agreement)",
    "reproduce": "re-run a logged run from its saved config and diff the metrics",
    "compare": "side-by-side metric table of runs",
    "export": "write a run's ranking and derived relevance in TREC format",
    "ui": "start the MLflow UI on the configured store (loopback only by default)",
    "gate": "regression gate: baseline vs candidate with a tolerance sized to the eval set",
    "judge": "judge calibration: review sampled verdicts in the browser, measure agreement, fit a threshold with cross-validation",
    "upload": "log a run saved locally while the tracking store was unreachable",
    "traces": "log one MLflow trace per query (GenAI pages) for runs logged without them",
}


def examples(*names: str, first_only: bool = False) -> str:
    lines = [example for name in names for example in (EXAMPLES[name][:1] if first_only else EXAMPLES[name])]
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported (start-up stays fast)."""
    parser = argparse.ArgumentParser(prog="ragexp", description=DESCRIPTION,
                                     epilog=examples("run", *COMMANDS, first_only=True) + "\n\n"
                                     "Every command: ragexp COMMAND --help. Docs: README.md, docs/mlflow.md.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="evaluate pipelines (Hydra app): ragexp run [overrides] [-m]", add_help=False)
    for name, help_text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text, epilog=examples(name),
                                        formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == command:
            _command_module(name).add_arguments(command_parser)
    return exact(parser)


def exact(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` and every sub-parser below it taking whole option names only (argparse would
    otherwise read ``--trac`` as ``--tracking-uri``)."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                exact(child)
    return parser


def _command_module(name: str):
    return importlib.import_module(f"ragexp.commands.{name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    terminal.install()  # untrusted text (a system's doc id, a stored field) prints as text, not as escape sequences
    for position, arg in enumerate(argv, 1):  # bytes that are not UTF-8 arrive as lone surrogates
        if any("\ud800" <= ch <= "\udfff" for ch in arg):
            print(f"ragexp: error: argument {position} ({terminal.escaped(arg.encode('utf-8', 'backslashreplace').decode())}) "
                  "is not valid UTF-8 text; retype it", file=sys.stderr)
            return USAGE_EXIT_CODE
    # MLflow draws a progress bar per downloaded artifact; ragexp fetches one small file at a time.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if argv and argv[0] == "run":
        from ragexp.jobs.app import run_app

        return run_app(argv[1:])
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return USAGE_EXIT_CODE
    try:
        runs = sys.modules.get("ragexp.commands._runs")  # imported by every command that takes a run
        if runs is not None:
            runs.resolve_run_refs(args)  # a run id or a unique prefix of one -> the run's id
        return int(_command_module(args.command).run(args) or 0)
    except RagexpInputError as err:
        print(f"ragexp {args.command}: error: {terminal.escaped(str(err))}", file=sys.stderr)
        return USAGE_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
