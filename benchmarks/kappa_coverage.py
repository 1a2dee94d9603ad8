"""Coverage of kappa's 95 % intervals at a review's sample sizes: the large-sample one of Fleiss,
Cohen & Everitt (:func:`~ragexp.judging.calibration.kappa_interval.kappa_interval`) and the
percentile bootstrap the review logs (:func:`~ragexp.judging.calibration.kappa_interval.bootstrap_kappa_interval`).

A person's label is ``supported`` with probability ``--rate``; the judge agrees with probability
``a`` on each claim, so the population kappa is ``(p_o - p_e) / (1 - p_e)`` of that 2x2 table. Each
repetition draws ``n`` claims; a sample whose kappa has no interval (a rater used one class) is
counted apart. Prints coverage (of the samples with an interval), mean width, and how often the
lower bound clears 0.4, per (agreement, n). Monte-Carlo error of a 95 % coverage over R
repetitions: ``sqrt(0.95 * 0.05 / R)``.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.kappa_coverage --repetitions 400``
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from ragexp.judging.calibration.kappa_interval import bootstrap_kappa_interval, kappa_interval


def population_kappa(rate: float, agree: float) -> float:
    p_o = agree
    judge_s = rate * agree + (1 - rate) * (1 - agree)
    p_e = rate * judge_s + (1 - rate) * (1 - judge_s)
    return (p_o - p_e) / (1 - p_e)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=0.5)
    parser.add_argument("--agreement", type=float, nargs="+", default=[0.7, 0.8, 0.9])
    parser.add_argument("--n", type=int, nargs="+", default=[15, 20, 40])
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    print(f"human rate {args.rate}, {args.repetitions} repetitions, {args.resamples} bootstrap resamples; Monte-Carlo "
          f"error of a 95 % coverage +/- {100 * math.sqrt(0.95 * 0.05 / args.repetitions):.1f} points (1 s.e.)\n")
    print("| judge agrees | kappa | n | no interval | Fleiss cover (width) | bootstrap cover (width) | "
          "lower bound >= 0.4: Fleiss / bootstrap |\n|---|---|---|---|---|---|---|")
    for agree in args.agreement:
        kappa = population_kappa(args.rate, agree)
        for n in args.n:
            hits = {"Fleiss": [], "bootstrap": []}
            widths = {"Fleiss": [], "bootstrap": []}
            clears = {"Fleiss": 0, "bootstrap": 0}
            none = 0
            for rep in range(args.repetitions):
                human = rng.random(n) < args.rate
                judge = np.where(rng.random(n) < agree, human, ~human)
                first = ["s" if h else "n" for h in human]
                second = ["s" if j else "n" for j in judge]
                found = {"Fleiss": kappa_interval(first, second),
                         "bootstrap": bootstrap_kappa_interval(first, second, resamples=args.resamples, seed=rep)}
                if found["Fleiss"].low is None:
                    none += 1
                    continue
                for name, interval in found.items():
                    hits[name].append(interval.low <= kappa <= interval.high)
                    widths[name].append(interval.high - interval.low)
                    clears[name] += interval.low >= 0.4
            cells = " | ".join(f"{100 * np.mean(hits[m]):.1f} % ({np.mean(widths[m]):.3f})" for m in hits)
            print(f"| {agree} | {kappa:.2f} | {n} | {none} | {cells} | "
                  f"{100 * clears['Fleiss'] / args.repetitions:.0f} % / {100 * clears['bootstrap'] / args.repetitions:.0f} % |")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
