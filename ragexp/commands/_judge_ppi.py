"""``ragexp judge ppi RUN_ID --labels FILE [--answer-labels FILE] [--no-log]``: a run's judge metrics corrected by human labels.

Reads the run's results (an MLflow run id, or a results JSON file) and a labels CSV through the
labels reader (:func:`ragexp.judging.calibration.labels.read_labels`: bounded, strict UTF-8,
closed columns), keeps the rows that label this run's own claims
(:func:`ragexp.evaluation.corrected.labels_for`), prints the judge's value, the PPI estimate and its
interval per metric beside each other, and logs the ``ppi.*`` metrics and the ``ragexp.ppi`` tag
to the run, with the rows that labelled it as the artifacts :data:`ragexp.evaluation.corrected.LABELS_ARTIFACT`
and ``ANSWER_LABELS_ARTIFACT`` (which ``ragexp gate`` recomputes the estimates from) (a run id
only; ``--no-log`` prints only). ``--answer-labels`` (a person's failure class of
whole answers, :mod:`ragexp.judging.answer_labels`) corrects ``generation_failure_rate`` and ``ok_rate``. A run none of whose claims is labelled is
"judge only, uncorrected", said in one line with exit code 2. The labels must be a random sample
of the run's claims, drawn within each judge verdict (``ragexp judge sample`` and ``ragexp judge
review`` draw so; docs/ppi.md).

``--labels-from OTHER`` (a run id or results file) uses the labels of OTHER's claims instead
(:func:`ragexp.evaluation.corrected.transferred`): refused unless both runs have the same judge key
(model + prompt + threshold), and valid only where a person's support rate given the judge's
verdict is the same in both runs (docs/ppi.md); the printout and the tag say so.
"""

from __future__ import annotations

import argparse

from ragexp.commands._runs import RUN_ID, client_for, load_results
from ragexp.errors import RagexpInputError
from ragexp.evaluation import corrected
from ragexp.judging import answer_labels
from ragexp.judging.answer_labels import read_answer_labels
from ragexp.judging.calibration.labels import labels_csv, read_labels
from ragexp.judging.calibration.record import judge_key


def ppi(args: argparse.Namespace) -> int:
    if not 0.5 <= args.confidence < 1:
        raise RagexpInputError(f"must be in [0.5, 1), got {args.confidence}", field="--confidence")
    if args.labels is None and args.answer_labels is None:
        raise RagexpInputError("give --labels (claims) or --answer-labels (whole answers), or both", field="--labels")
    if args.labels_from and args.labels is None:
        raise RagexpInputError("--labels-from transfers claim labels: give --labels", field="--labels-from")
    rows = read_labels(args.labels) if args.labels else []
    answer_rows = read_answer_labels(args.answer_labels) if args.answer_labels else []
    results = load_results(args.run, args.tracking_uri)
    run_id = args.run if RUN_ID.fullmatch(args.run) else results.meta.get("run_id")
    source = ", ".join(path.name for path in (args.labels, args.answer_labels) if path)
    if args.labels_from:
        other = load_results(args.labels_from, args.tracking_uri)
        keys = [judge_key(r.meta["judge"]) if isinstance(r.meta.get("judge"), dict) else None for r in (results, other)]
        if keys[0] is None or keys[0] != keys[1]:
            raise RagexpInputError(f"labels transfer only between runs of the same judge (model + prompt + threshold): "
                                   f"this run's judge is {keys[0] or 'none'}, that run's {keys[1] or 'none'}",
                                   field="--labels-from")
        other_id = args.labels_from if RUN_ID.fullmatch(args.labels_from) else other.meta.get("run_id")
        found = corrected.labels_for(other, rows, other_id)
        estimates = corrected.transferred(results, other, found.labels, args.confidence)
        source = (f"{source}, labels of run {other_id or args.labels_from} transferred (same judge {keys[0]}; "
                  "assumes a person's support rate given the judge's verdict is the same in both runs)")
        print(f"labels of {args.labels_from}: {found.describe().replace('this run', 'that run')}")
        print("ASSUMPTION: a person's support rate given the judge's verdict is the same in both runs (docs/ppi.md)")
    else:
        found = corrected.labels_for(results, rows, run_id)
        estimates = corrected.corrected(results, found.labels, args.confidence)
        if rows:
            print(found.describe())
    if answer_rows:
        answers = corrected.answer_labels_for(results, answer_rows, run_id)
        print(f"{len(answers)} human labels of this run's answers ({len(answer_rows) - len(answers)} rows of other runs, "
              "other answers or unlabelled left out)")
        estimates.update({metric: e for metric, e in corrected.corrected(results, {}, args.confidence, answers).items()
                          if metric in corrected.ANSWER_METRICS})
    if not estimates:
        raise RagexpInputError(f"no row labels a claim or answer of {'that' if args.labels_from else 'this'} run; its judge "
                               f"metrics stay {corrected.UNCORRECTED}", file=args.labels or args.answer_labels, field="id")
    print(f"{'metric':<20}{'judge alone':>12}{'PPI estimate':>14}  {args.confidence:.0%} interval ({next(iter(estimates.values())).interval})")
    for metric, estimate in estimates.items():
        print(f"{metric:<20}{estimate.judge_mean:>12.4f}{estimate.estimate:>14.4f}  [{estimate.low:.4f}, {estimate.high:.4f}]")
        for stratum in estimate.strata:
            print(f"  {stratum.name:<18} {stratum.units} units ({stratum.weight:.1%} of the metric), {stratum.labels} "
                  f"labelled: judge {stratum.judge_mean:.3f}, human {stratum.estimate:.3f}")
    for metric, estimate in estimates.items():
        if estimate.uncorrected_strata:
            print(f"note: {metric}: no labels among " + ", ".join(estimate.uncorrected_strata)
                  + ": the judge's values there stand uncorrected and the interval takes 0 to 1 for them")
    if args.no_log or not RUN_ID.fullmatch(args.run):
        return 0
    from ragexp.tracking import store
    from ragexp.tracking.metric_names import to_mlflow

    client, _ = client_for(args)
    store.log_batched(client, args.run, metrics={to_mlflow(k): v for k, v in corrected.aggregates(estimates).items()},
                      tags={corrected.TAG: corrected.tag_text(estimates, source)})
    logged = "ppi.* metrics, tag " + corrected.TAG
    if not args.labels_from:  # the run's own labels, for ragexp gate to recompute from (transferred ones are not its own)
        own = [row for row in rows if row.id.rpartition("/")[2] in found.labels and row.id.rpartition("/")[0] in ("", args.run)]
        if own:
            store.log_artifact_text(client, args.run, corrected.LABELS_ARTIFACT, labels_csv(own))
            logged += ", artifact " + corrected.LABELS_ARTIFACT
        if answer_rows:
            mine = corrected.answer_labels_for(results, answer_rows, run_id)
            kept = [row for row in answer_rows if row.id.rpartition("/")[2] in mine]
            store.log_artifact_text(client, args.run, corrected.ANSWER_LABELS_ARTIFACT, labels_csv(kept, answer_labels.COLUMNS))
            logged += ", artifact " + corrected.ANSWER_LABELS_ARTIFACT
    print(f"logged to run {args.run}: {logged}")
    return 0
