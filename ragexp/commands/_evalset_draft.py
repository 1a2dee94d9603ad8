"""``ragexp evalset draft --corpus PATH --per-category N [--out QUEUE]``: drafted questions with
evidence, appended to a review queue (never to an eval set; the annotation page accepts them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragexp.candidates.drafts import CATEGORIES
from ragexp.errors import RagexpInputError

HELP = "draft questions with evidence from a language model, into a review queue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="corpus folder or corpus .jsonl to draft from")
    parser.add_argument("--per-category", type=int, required=True, metavar="N",
                        help=f"sections sampled (one draft each) per category: {', '.join(CATEGORIES)}")
    parser.add_argument("--out", type=Path, default=Path("drafts.jsonl"), help="queue file, appended to (default drafts.jsonl)")
    parser.add_argument("--generator", choices=("local", "openai"), default="local",
                        help="the local model (default) or an OpenAI-compatible endpoint")
    parser.add_argument("--model", help="short name or path (local, default smollm2-135m), model name (openai)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --generator openai")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the endpoint's key (default OPENAI_API_KEY)")
    parser.add_argument("--seed", type=int, default=0, help="section sampling seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from ragexp.candidates.drafts import append_to_queue, draft_questions, read_queue
    from ragexp.data.loaders.corpus import load_corpus
    from ragexp.llm.chat_models import build_chat_model

    if args.per_category < 1:
        raise RagexpInputError(f"must be at least 1, got {args.per_category}", field="--per-category")
    from ragexp.config.bounds import MAX_DRAFTS_PER_CATEGORY, check_count

    check_count(args.per_category, "--per-category", high=MAX_DRAFTS_PER_CATEGORY)
    if args.generator == "openai" and not (args.base_url and args.model):
        raise RagexpInputError("--generator openai needs --base-url and --model", field="--base-url")
    corpus = load_corpus(args.corpus)
    queued = read_queue(args.out)
    if args.generator == "openai":
        spec = {"backend": "openai", "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env}
    else:
        spec = {"backend": "local", "model": args.model or "smollm2-135m"}
    drafts, report = draft_questions(corpus, build_chat_model(spec), args.per_category, seed=args.seed)
    written = append_to_queue(args.out, queued, drafts)
    for line in report.lines_of_text():
        print(line)
    print(f"appended {written} drafts to {args.out} (source: draft; they enter an eval set only when a person accepts them)")
    return 0
