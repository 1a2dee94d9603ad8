"""``ragexp judge``: check the judge against a human.

``ragexp judge sample RUN_ID -n 20 --out verdicts.csv`` draws judged claims from a run (its
``ragexp_results.json``; a results file path works too) into a labels CSV with the judge's
verdict filled in and ``human_label`` empty. A reviewer fills ``human_label``; then
``ragexp judge agreement verdicts.csv`` prints accuracy, Cohen's kappa and the confusion matrix.
With ``--judge local|lexical|openai`` the agreement command first runs that judge on every
(context, claim) row, so a labelled set such as ``ragexp/data/datasets/demo/calibration.csv`` measures
any judge; ``--run RUN_ID`` logs the numbers to that MLflow run.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from tqdm.auto import tqdm

from ragexp.commands._runs import add_tracking_argument, client_for, get_run, load_results
from ragexp.errors import RagexpInputError
from ragexp.judging.calibration import LabelledClaim, agreement, label_of, read_labels, write_labels
from ragexp.judging.judges import LIKELIHOOD_METHODS, LexicalJudge, LLMJudge, LocalLikelihoodJudge
from ragexp.tracking import store

JUDGES = ("local", "lexical", "openai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="judge_command", metavar="ACTION", required=True)
    sample = sub.add_parser("sample", help="draw judged claims from a run into a CSV for human review")
    sample.add_argument("run", metavar="RUN_ID", help="MLflow run id (or a ragexp results JSON file)")
    sample.add_argument("-n", type=int, default=20, help="claims to draw (default 20)")
    sample.add_argument("--out", required=True, type=Path, help="CSV to write")
    sample.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    add_tracking_argument(sample)

    agree = sub.add_parser("agreement", help="accuracy, Cohen's kappa and confusion of judge vs human labels")
    agree.add_argument("labels", type=Path, metavar="LABELS.csv")
    agree.add_argument("--judge", choices=JUDGES, help="run this judge on the CSV's (context, claim) rows first")
    agree.add_argument("--method", choices=LIKELIHOOD_METHODS, help="local judge scoring method (default: the judge's)")
    agree.add_argument("--threshold", type=float, help="support threshold of the local or lexical judge")
    agree.add_argument("--model", help="judge model: short name or path (local), model name (openai)")
    agree.add_argument("--base-url", help="OpenAI-compatible endpoint for --judge openai")
    agree.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the API key (openai)")
    agree.add_argument("--out", type=Path, help="write the CSV with the judge's verdicts filled in")
    agree.add_argument("--run", metavar="RUN_ID", help="log the agreement numbers to this MLflow run")
    add_tracking_argument(agree)


def run(args: argparse.Namespace) -> int:
    if args.judge_command == "sample":
        return _sample(args)
    return _agreement(args)


def judged_claims(per_query: list[dict]) -> list[LabelledClaim]:
    """Every judged claim of a run as an unlabelled row (id ``<query_id>#claim_<i>``)."""
    rows = []
    for record in per_query:
        for index, verdict in enumerate(record.get("claims") or []):
            score = verdict.get("score")
            rows.append(
                LabelledClaim(
                    id=f"{record['query_id']}#claim_{index}",
                    context=record.get("judge_context", ""),
                    claim=verdict["claim"],
                    note=verdict.get("error") or "",
                    judge_label=label_of(verdict.get("supported")),
                    judge_score="" if score is None else f"{score:.6g}",
                    judge_raw=verdict.get("raw", ""),
                )
            )
    return rows


def _sample(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise RagexpInputError("must be at least 1", field="-n")
    results = load_results(args.run, args.tracking_uri)
    claims = judged_claims(results.per_query)
    if not claims:
        raise RagexpInputError(f"run {args.run!r} has no judged claims (was it run with a generator and a judge?)", field="RUN_ID")
    chosen = sorted(random.Random(args.seed).sample(claims, min(args.n, len(claims))), key=lambda row: row.id)
    write_labels(args.out, chosen)
    print(f"wrote {len(chosen)} of {len(claims)} judged claims to {args.out}")
    print(f"fill in human_label (supported | not_supported), then: ragexp judge agreement {args.out}")
    return 0


def _build_judge(args: argparse.Namespace):
    if args.judge == "lexical":
        return LexicalJudge() if args.threshold is None else LexicalJudge(threshold=args.threshold)
    if args.judge == "local":
        from ragexp.llm.local_hf import LocalHFModel

        kwargs = {"threshold": args.threshold}
        if args.method:
            kwargs["method"] = args.method
        return LocalLikelihoodJudge(LocalHFModel(args.model or "smollm2-135m"), **kwargs)
    from ragexp.llm.models import build_chat_model

    if not args.base_url or not args.model:
        raise RagexpInputError("--judge openai needs --base-url and --model", field="--base-url")
    spec = {"backend": "openai", "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env}
    return LLMJudge(build_chat_model(spec), claim_splitter="sentences")


def apply_judge(judge, rows: list[LabelledClaim]) -> None:
    """Fill ``judge_label``, ``judge_score`` and ``judge_raw`` of every row (one call per context)."""
    by_context: dict[str, list[LabelledClaim]] = defaultdict(list)
    for row in rows:
        by_context[row.context].append(row)
    for context, group in tqdm(by_context.items(), desc="judging", unit="context"):
        for row, verdict in zip(group, judge.judge_claims([row.claim for row in group], context)):
            row.judge_label = label_of(verdict.supported)
            row.judge_score = "" if verdict.score is None else f"{verdict.score:.6g}"
            row.judge_raw = verdict.error or verdict.raw


def _agreement(args: argparse.Namespace) -> int:
    rows = read_labels(args.labels)
    if args.judge:
        judge = _build_judge(args)
        apply_judge(judge, rows)
        print(f"judge: {args.judge} ({judge.model_id})")
    elif not any(row.judge_label for row in rows):
        raise RagexpInputError("no judge_label values to compare; pass --judge local|lexical|openai", file=args.labels, field="judge_label")
    if args.out:
        write_labels(args.out, rows)
    report = agreement(rows)
    print(report.render())
    if args.run:
        client, _ = client_for(args)
        get_run(client, args.run)
        store.log_batched(client, args.run, metrics=report.metrics())
        store.log_artifact_text(client, args.run, "judge_agreement.txt", report.render() + "\n")
        print(f"logged to run {args.run}")
    return 0
