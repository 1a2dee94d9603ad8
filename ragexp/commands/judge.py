"""``ragexp judge``: check the judge against a human.

``ragexp judge sample RUN_ID -n 20 --out verdicts.csv`` draws judged claims from a run (its
``ragexp_results.json``; a results file path works too), across the judge's verdicts as ``judge
review`` does (:func:`ragexp.judging.ppi.draw_across`), into a labels CSV with the judge's
verdict filled in and ``human_label`` empty. A reviewer fills ``human_label``; then
``ragexp judge agreement verdicts.csv`` prints accuracy, Cohen's kappa and the confusion matrix.
With ``--judge local|lexical|openai`` the agreement command first runs that judge on every
(context, claim) row, so a labelled set such as ``ragexp/data/datasets/demo/calibration.csv`` measures
any judge; ``--run RUN_ID`` logs the numbers to that MLflow run, and ``--calibration FILE``
applies a threshold fitted elsewhere (e.g. fit on the demo set, measure on your own labels).

``ragexp judge review RUN_ID -n 20 --labels LABELS.csv`` does the same in the browser: a person
labels the sampled claims with the keyboard, the verdicts go to the labels CSV, and the agreement
(accuracy, kappa with its 95 % interval) is logged to the run (:mod:`ragexp.commands._judge_review`,
:mod:`ragexp.judge_review`).

``ragexp judge ppi RUN_ID --labels LABELS.csv`` corrects the run's faithfulness by those labels
(prediction-powered inference, :mod:`ragexp.commands._judge_ppi`, :mod:`ragexp.evaluation.corrected`).

``ragexp judge calibrate LABELS.csv --judge lexical|local [--method M] --out CALIB.json`` scores
every row once with the judge's continuous score (cached in the stage cache), fits the verdict
threshold on all labelled rows, reports the k-fold cross-validated agreement of that fitting
procedure (folds grouped by context) and writes the calibration file a run takes as
``judge.calibration=CALIB.json`` (:mod:`ragexp.judging.calibration.record`). ``--judge openai``
fits nothing: it records the judge's measured agreement.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tqdm.auto import tqdm

from ragexp.commands._runs import (
    add_tracking_argument,
    client_for,
    get_run,
    load_results,
    run_or_file_ref,
    run_ref,
)
from ragexp.errors import RagexpInputError
from ragexp.evaluation import corrected
from ragexp.judging.calibration.labels import (
    LabelledClaim,
    agreement,
    label_of,
    read_labels,
    write_labels,
)
from ragexp.judging.calibration.record import (
    calibrate_threshold,
    check_calibration_set,
    measure_agreement,
)
from ragexp.judging.calibration.threshold import verdicts_at
from ragexp.judging.judges import (
    LIKELIHOOD_METHODS,
    EmbeddingJudge,
    LexicalJudge,
    LLMJudge,
    LocalLikelihoodJudge,
)
from ragexp.judge_review.sample import judged_claims
from ragexp.judging.ppi import draw_across
from ragexp.llm.base import LLMCallError
from ragexp.runtime.stage_cache import StageCache
from ragexp.tracking import store

JUDGES = ("local", "lexical", "embedding", "openai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="judge_command", metavar="ACTION", required=True)
    sample = sub.add_parser("sample", help="draw judged claims from a run into a CSV for human review")
    sample.add_argument("run", metavar="RUN_ID", type=run_or_file_ref,
                        help="MLflow run id or a unique prefix of one (or a ragexp results JSON file)")
    sample.add_argument("-n", type=int, default=20, help="claims to draw (default 20)")
    sample.add_argument("--out", required=True, type=Path, help="CSV to write")
    sample.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    sample.add_argument("--answers", action="store_true",
                        help="draw whole answers (their failure class) instead of claims: the answer-labels CSV")
    add_tracking_argument(sample)

    review = sub.add_parser("review", help="label a run's sampled claims in the browser; agreement logged to the run")
    review.add_argument("run", metavar="RUN_ID", type=run_ref,
                        help="MLflow run id (or a unique prefix of one) of a run with a generator and a judge")
    review.add_argument("-n", type=int, default=20, help="claims to draw (default 20)")
    review.add_argument("--labels", type=Path, default=Path("judge_labels.csv"),
                        help="labels CSV the verdicts are added to (default ./judge_labels.csv; created if missing)")
    review.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    review.add_argument("--port", type=int, default=5002, help="port on 127.0.0.1 (default 5002); a taken port fails at once")
    add_tracking_argument(review)

    ppi = sub.add_parser("ppi", help="a run's faithfulness corrected by human labels (PPI), with its interval")
    ppi.add_argument("run", metavar="RUN_ID", type=run_or_file_ref,
                     help="MLflow run id or a unique prefix of one (or a ragexp results JSON file)")
    ppi.add_argument("--labels", type=Path, help="claim labels CSV (ragexp judge review / sample format)")
    ppi.add_argument("--answer-labels", type=Path, metavar="FILE",
                     help="answer labels CSV (ragexp judge sample --answers): corrects generation_failure_rate and ok_rate")
    ppi.add_argument("--labels-from", metavar="OTHER_RUN", type=run_or_file_ref,
                     help="use the labels of this other run of the same judge (an assumption: docs/ppi.md)")
    ppi.add_argument("--confidence", type=float, default=0.95, help="interval confidence (default 0.95)")
    ppi.add_argument("--no-log", action="store_true", help="print only; do not log to the run")
    add_tracking_argument(ppi)

    agree = sub.add_parser("agreement", help="accuracy, Cohen's kappa and confusion of judge vs human labels")
    agree.add_argument("labels", type=Path, metavar="LABELS.csv")
    agree.add_argument("--judge", choices=JUDGES, help="run this judge on the CSV's (context, claim) rows first")
    _add_judge_arguments(agree)
    agree.add_argument("--threshold", type=float, help="support threshold of the local or lexical judge")
    agree.add_argument("--calibration", type=Path, metavar="CALIB.json",
                       help="use the threshold of this calibration file (from ragexp judge calibrate)")
    agree.add_argument("--out", type=Path, help="write the CSV with the judge's verdicts filled in")
    agree.add_argument("--run", metavar="RUN_ID", type=run_ref,
                       help="log the agreement numbers to this MLflow run (its id or a unique prefix)")
    _add_cache_argument(agree)
    add_tracking_argument(agree)

    calibrate = sub.add_parser("calibrate", help="fit the judge's threshold on human labels, with cross-validated agreement")
    calibrate.add_argument("labels", type=Path, metavar="LABELS.csv")
    calibrate.add_argument("--judge", choices=JUDGES, required=True, help="the judge to calibrate")
    _add_judge_arguments(calibrate)
    calibrate.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by context (default 5)")
    calibrate.add_argument("--seed", type=int, default=0, help="fold assignment seed (default 0)")
    calibrate.add_argument("--name", help="the labelled set's name in runs (default: the file name without .csv)")
    calibrate.add_argument("--out", type=Path, required=True, help="calibration JSON to write")
    _add_cache_argument(calibrate)


def _add_cache_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, help="stage cache for the judge's scores (default: $RAGEXP_CACHE_DIR "
                                                        "or ./.ragexp_cache)")


def _add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", choices=LIKELIHOOD_METHODS, help="local judge scoring method (default: the judge's)")
    parser.add_argument("--model", help="judge model: short name or path (local, embedding), model name (openai)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the API key (openai)")


def run(args: argparse.Namespace) -> int:
    if args.judge_command == "sample":
        return _sample(args)
    if args.judge_command == "review":
        from ragexp.commands._judge_review import review

        return review(args)
    if args.judge_command == "calibrate":
        return _calibrate(args)
    if args.judge_command == "ppi":
        from ragexp.commands._judge_ppi import ppi

        return ppi(args)
    return _agreement(args)


def _sample(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise RagexpInputError("must be at least 1", field="-n")
    from ragexp.config.bounds import MAX_CLAIMS_DRAWN, check_count

    check_count(args.n, "-n", high=MAX_CLAIMS_DRAWN)
    results = load_results(args.run, args.tracking_uri)
    if args.answers:
        return _sample_answers(args, results)
    claims = judged_claims(results.per_query)
    if not claims:
        raise RagexpInputError(f"run {args.run!r} has no judged claims (was it run with a generator and a judge?)", field="RUN_ID")
    strata = corrected.review_strata(results.per_query)
    chosen = draw_across(claims, args.n, args.seed, lambda claim: strata.get(claim.id, claim.judge_label))
    write_labels(args.out, chosen)
    print(f"wrote {len(chosen)} of {len(claims)} judged claims to {args.out}")
    print(f"fill in human_label (supported | not_supported), then: ragexp judge agreement {args.out}")
    return 0


def _sample_answers(args: argparse.Namespace, results) -> int:
    """``judge sample --answers``: answerable items with an answer, drawn across their failure class."""
    from ragexp.judging.answer_labels import CLASSES, AnswerLabel, write_answer_labels

    answers = [AnswerLabel(id=row.query_id, answer=row.answer or "", query=row.query, judge_class=row.failure_class)
               for row in results.per_query if row.answerable and row.failure_class in CLASSES]
    if not answers:
        raise RagexpInputError(f"run {args.run!r} has no answered answerable items (was it run with a generator?)",
                               field="RUN_ID")
    chosen = draw_across(answers, args.n, args.seed, lambda answer: answer.judge_class)
    write_answer_labels(args.out, chosen)
    print(f"wrote {len(chosen)} of {len(answers)} answers to {args.out}")
    print(f"fill in human_class ({' | '.join(CLASSES)}), then: ragexp judge ppi {args.run} --answer-labels {args.out}")
    return 0


def _build_judge(args: argparse.Namespace):
    threshold = getattr(args, "threshold", None)
    calibration = getattr(args, "calibration", None)
    try:
        if args.judge == "lexical":
            return LexicalJudge(threshold=threshold, calibration=calibration)
        if args.judge == "embedding":
            return _embedding_judge(args.model, threshold, calibration)
        if args.judge == "local":
            from ragexp.llm.local_hf import LocalHFModel

            kwargs = {"threshold": threshold, "calibration": calibration}
            if args.method:
                kwargs["method"] = args.method
            return LocalLikelihoodJudge(LocalHFModel(args.model or "smollm2-135m"), **kwargs)
        from ragexp.llm.chat_models import build_chat_model

        if not args.base_url or not args.model:
            raise RagexpInputError("--judge openai needs --base-url and --model", field="--base-url")
        spec = {"backend": "openai", "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env}
        return LLMJudge(build_chat_model(spec), claim_splitter="sentences", calibration=calibration)
    except RagexpInputError as err:  # constructor fields are command-line options here
        field = {"calibration": "--calibration", "threshold": "--threshold"}.get(err.field or "", err.field)
        raise RagexpInputError(err.message, file=err.file, line=err.line, field=field) from None


def _embedding_judge(model: str | None, threshold: float | None, calibration: str | None) -> EmbeddingJudge:
    """The run's embedding judge (``judge=embedding``, its encoder the ``embedding`` group), built
    from the config tree as a run builds it; ``model`` overrides ``embedding.model``."""
    from omegaconf import OmegaConf

    from ragexp.config.compose import compose_config
    from ragexp.evaluation.pipeline import build_component

    cfg = compose_config(["judge=embedding", *([f"embedding.model={_quoted(model)}"] if model else [])])
    OmegaConf.update(cfg, "judge.threshold", threshold)
    OmegaConf.update(cfg, "judge.calibration", calibration)
    try:
        return build_component(cfg.judge, "judge", cache=None)
    except RagexpInputError as err:
        raise RagexpInputError(err.message, file=err.file, line=err.line, field=(err.field or "").removeprefix("judge.")) from None


def _quoted(value: str) -> str:
    """A Hydra override value taken literally (paths with ``=``, ``,`` or spaces)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def score_rows(judge, rows: list[LabelledClaim], cache: StageCache) -> list[float | None]:
    """Every row's continuous support score from ``judge.scores`` (one call per context, cached
    by judge identity, model parameters, context and claims); ``None`` where the judge could not
    score a row."""
    by_context: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_context[row.context].append(index)
    model_params = getattr(getattr(judge, "scoring_model", None), "params", dict)()
    scores: list[float | None] = [None] * len(rows)
    for context, indices in tqdm(by_context.items(), desc="scoring", unit="context"):
        claims = [rows[i].claim for i in indices]
        key = {"judge": judge.identity(), "model": model_params, "context": context, "claims": claims}
        values = cache.get_json("judge_scores", key)
        if values is None:
            try:
                values = [None if v is None else float(v) for v in judge.scores(claims, context)]
            except LLMCallError:
                values = [None] * len(claims)
            else:
                cache.put_json("judge_scores", key, values)
        for i, value in zip(indices, values):
            scores[i] = value
    return scores


def apply_scores(judge, rows: list[LabelledClaim], scores: list[float | None]) -> None:
    """Fill ``judge_label``, ``judge_score`` and ``judge_raw`` from scores at the judge's threshold
    (a row without a score is a judge failure)."""
    for row, score in zip(rows, scores):
        if score is None:
            row.judge_label, row.judge_score, row.judge_raw = "", "", "not scored"
            continue
        row.judge_label = verdicts_at([score], judge.threshold)[0]
        row.judge_score = f"{score:.6g}"
        row.judge_raw = f"score={score:.6g} threshold={judge.threshold:.6g}"


def _calibrate(args: argparse.Namespace) -> int:
    rows = read_labels(args.labels)
    judge = _build_judge(args)
    check_calibration_set([row for row in rows if row.human_label], args.labels, args.folds if hasattr(judge, "scores") else None)
    if hasattr(judge, "scores"):
        scores = score_rows(judge, rows, StageCache(args.cache_dir))
        calibration = calibrate_threshold(rows, scores, judge.identity(), args.labels, folds=args.folds, seed=args.seed,
                                          set_name=args.name)
    else:
        apply_judge(judge, rows)
        calibration = measure_agreement(rows, judge.identity(), args.labels, set_name=args.name)
    calibration.save(args.out)
    print(calibration.render())
    print(f"wrote {args.out}; use it in a run with judge.calibration={args.out}")
    return 0


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
        if hasattr(judge, "scores"):
            apply_scores(judge, rows, score_rows(judge, rows, StageCache(args.cache_dir)))
        else:
            apply_judge(judge, rows)
        threshold = getattr(judge, "threshold", None)
        print(f"judge: {args.judge} ({judge.model_id})"
              + ("" if threshold is None else f", threshold {threshold:.6g} ({judge.threshold_source})"))
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
