"""The worked example of docs/ppi.md: a run's judge faithfulness, its PPI correction and hand labels side by side.

Reads a run's ``ragexp_results.json`` and a labels CSV (``benchmarks/data/demo_answer_claims.csv``:
every claim of the demo's first 24 questions, labelled by hand) through ragexp's readers, keeps the
labels that match the run's claims (id, claim text and context), and prints:

1. the whole run: the judge's ``faithfulness`` and claim share, and the PPI estimates with their
   intervals taking the hand-labelled claims as the labelled sample (they are all claims of the
   first 24 questions, not a random draw: the estimate holds only if those questions are typical);
2. the hand-labelled claims as a population of their own, where the truth is known: the judge's
   share, the hand-labelled share, and over ``--repetitions`` balanced random draws of n labels
   (``ragexp.judging.ppi.draw_across``, as the review draws) the mean PPI estimate, the mean
   interval and how often it holds the hand-labelled share.

Run: ``python -m benchmarks.ppi_demo RESULTS.json benchmarks/data/demo_answer_claims.csv``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ragexp.evaluation import corrected
from ragexp.evaluation.results import RunResults
from ragexp.judging.calibration.labels import read_labels
from ragexp.judging.ppi import draw_across, ppi_estimate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("labels", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--repetitions", type=int, default=1000)
    args = parser.parse_args()
    results = RunResults.load(args.results)
    found = corrected.labels_for(results, read_labels(args.labels))
    units = corrected.units_of(results.per_query)
    claims = units["claim_faithfulness"]
    print(f"run: {len(results.per_query)} questions, {len(claims)} judged claims; {found.describe()}; "
          f"{found.other_runs} rows are no claim of this run")
    print(f"judge faithfulness (query mean) {results.aggregates.get('faithfulness', float('nan')):.3f}, "
          f"claims the judge called supported {np.mean([u.prediction for u in claims]):.3f}\n")
    print("| metric | judge alone (all claims) | PPI estimate | 95 % interval |\n|---|---|---|---|")
    for metric, estimate in corrected.corrected(results, found.labels).items():
        print(f"| {metric} | {estimate.judge_mean:.3f} | {estimate.estimate:.3f} | {estimate.low:.3f} to {estimate.high:.3f} |")

    labelled = [u for u in claims if u.id in found.labels and u.stratum != corrected.EMPTY_CONTEXT]
    truth = float(np.mean([found.labels[u.id] for u in labelled]))
    judge = float(np.mean([u.prediction for u in labelled]))
    print(f"\nthe {len(labelled)} hand-labelled claims as the population: judge {judge:.3f}, hand-labelled {truth:.3f}")
    print("\n| labels drawn | mean PPI estimate | mean interval | holds the hand-labelled share |\n|---|---|---|---|")
    for n in args.sizes:
        estimates, lows, highs, held = [], [], [], 0
        for seed in range(args.repetitions):
            sample = draw_across(labelled, n, seed, lambda u: u.stratum)
            result = ppi_estimate(labelled, {u.id: found.labels[u.id] for u in sample})
            estimates.append(result.estimate)
            lows.append(result.low)
            highs.append(result.high)
            held += result.low <= truth <= result.high
        print(f"| {n} of {len(labelled)} | {np.mean(estimates):.3f} | {np.mean(lows):.3f} to {np.mean(highs):.3f} | "
              f"{held / args.repetitions:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
