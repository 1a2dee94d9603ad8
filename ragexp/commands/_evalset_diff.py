"""``ragexp evalset diff OLD NEW --corpus PATH``: what changed, and are runs on the two comparable?

Exit 0 when nothing changed, 1 when something did (as ``diff``), 2 on unusable input.
"""

from __future__ import annotations

import argparse
import json

HELP = "items added, removed and changed between two eval sets; are runs on them comparable?"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="the earlier eval set")
    parser.add_argument("new", metavar="NEW", help="the later eval set")
    parser.add_argument("--corpus", required=True, help="corpus both resolve against (corpus folder or .jsonl)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")


def run(args: argparse.Namespace) -> int:
    from ragexp.data.evalset_diff import diff_evalsets, render_text
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.data.loaders.evalset import load_evalset

    corpus = load_corpus(args.corpus)
    result = diff_evalsets(load_evalset(args.old, corpus), load_evalset(args.new, corpus))
    print(json.dumps(result.to_dict(), indent=2) if args.format == "json" else render_text(result, args.old, args.new))
    return 0 if result.identical and not result.reordered else 1
