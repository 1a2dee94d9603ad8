"""The ``ragexp`` command: a thin dispatcher.

``ragexp run ...`` hands its arguments to the Hydra app (so ``-m`` and overrides work as in any
Hydra app); every other sub-command lives in ``ragexp.commands.<name>`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Bad input raises
:class:`ragexp.errors.RagexpInputError`, printed as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ragexp.errors import USAGE_EXIT_CODE, RagexpInputError

COMMANDS = {
    "evalset": "inspect eval sets (lint)",
    "reproduce": "re-run a logged run from its saved config and diff the metrics",
    "compare": "side-by-side metric table of runs",
    "export": "write a run's ranking and derived relevance in TREC format",
    "ui": "start the MLflow UI on the configured store (loopback only by default)",
    "gate": "regression gate: baseline vs candidate with a tolerance sized to the eval set",
    "judge": "judge calibration: sample verdicts for review, measure agreement, fit a threshold with cross-validation",
    "upload": "log a run saved locally while the tracking store was unreachable",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported (start-up stays fast)."""
    parser = argparse.ArgumentParser(prog="ragexp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="run the Hydra app: ragexp run [overrides] [-m]", add_help=False)
    for name, help_text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            _command_module(name).add_arguments(command_parser)
    return parser


def _command_module(name: str):
    return importlib.import_module(f"ragexp.commands.{name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # MLflow draws a progress bar per downloaded artifact; ragexp fetches one small file at a time.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if argv and argv[0] == "run":
        from ragexp.app import run_app

        return run_app(argv[1:])
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return USAGE_EXIT_CODE
    try:
        return int(_command_module(args.command).run(args) or 0)
    except RagexpInputError as err:
        print(f"ragexp {args.command}: error: {err}", file=sys.stderr)
        return USAGE_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
