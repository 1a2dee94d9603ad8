"""Coverage of the true faithfulness by the judge's raw interval and by the PPI intervals: docs/ppi.md.

A run of ``--claims`` claims (default 500), each truly supported with probability ``--rate``
(default 0.55); a lenient judge calls every supported claim supported and ``--lenient`` (default
30 %) of the unsupported ones supported too. The truth is the share of this run's claims a person
would call supported (the finite population a metric reports on). Each repetition draws a new run
and a new human-labelled sample of n claims, for n in ``--labels`` (default 20, 50, 100), and asks
whether each 95 % interval holds the truth:

- ``judge raw``: the judge's mean over all claims with its normal interval ``mean -/+ 1.96 sd/sqrt(N)``
  (a bootstrap of the judge's values, as the gate and compare resample them, behaves alike: both
  measure the judge's noise and take its verdicts as the truth);
- ``PPI, CLT, uniform sample``: the paper's interval on a uniform sample (``ppi_py.ppi_mean_ci(...,
  lam=1)``, :func:`ragexp.judging.ppi.ppi_mean`);
- ``PPI, CLT, drawn across verdicts``: the stratified CLT interval on the review's balanced draw;
- ``PPI, logged (Wilson-MOVER)``: the interval ragexp logs, on the review's balanced draw
  (:func:`ragexp.judging.ppi.draw_across`, :func:`ragexp.judging.ppi.ppi_estimate`).

Prints a markdown table (coverage and mean width) and writes the plot to ``--plot``.

Run: ``python -m benchmarks.ppi_coverage --plot docs/images/ppi-coverage.png``
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from ragexp.judging.ppi import Unit, draw_across, ppi_estimate, ppi_mean, z_of

METHODS = ("judge raw", "PPI, CLT, uniform sample", "PPI, CLT, drawn across verdicts", "PPI, logged (Wilson-MOVER)")


def one_run(rng: np.random.Generator, claims: int, rate: float, lenient: float):
    truth = rng.random(claims) < rate
    judged = truth | (~truth & (rng.random(claims) < lenient))
    units = [Unit(str(i), float(j), 1.0, "supported" if j else "not_supported") for i, j in enumerate(judged)]
    return truth.astype(float), judged.astype(float), units


def intervals(rng, truth, judged, units, n: int, seed: int) -> dict[str, tuple[float, float]]:
    z = z_of(0.95)
    mean = judged.mean()
    half = z * judged.std(ddof=1) / math.sqrt(judged.size)
    out = {"judge raw": (mean - half, mean + half)}
    uniform = rng.choice(truth.size, n, replace=False)
    estimate, variance = ppi_mean(truth[uniform], judged[uniform], judged)
    out["PPI, CLT, uniform sample"] = (estimate - z * math.sqrt(variance), estimate + z * math.sqrt(variance))
    sample = draw_across(units, n, seed, lambda u: u.stratum)
    result = ppi_estimate(units, {u.id: truth[int(u.id)] for u in sample})
    out["PPI, CLT, drawn across verdicts"] = ((result.clt_low, result.clt_high) if result.clt_low is not None
                                              else (result.estimate, result.estimate))
    out["PPI, logged (Wilson-MOVER)"] = (result.low, result.high)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--rate", type=float, default=0.55)
    parser.add_argument("--lenient", type=float, default=0.3)
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    covered = {n: dict.fromkeys(METHODS, 0) for n in args.labels}
    widths = {n: {m: [] for m in METHODS} for n in args.labels}
    bias = []
    for rep in range(args.repetitions):
        truth, judged, units = one_run(rng, args.claims, args.rate, args.lenient)
        bias.append(judged.mean() - truth.mean())
        for n in args.labels:
            for method, (low, high) in intervals(rng, truth, judged, units, n, rep).items():
                covered[n][method] += low <= truth.mean() <= high
                widths[n][method].append(high - low)
    print(f"{args.repetitions} repetitions, {args.claims} claims, true supported rate {args.rate}, "
          f"judge calls {args.lenient:.0%} of unsupported claims supported: judge mean - truth = {np.mean(bias):+.3f}; "
          f"{time.perf_counter() - started:.0f} s")
    print("\n| human labels | " + " | ".join(METHODS) + " |\n|---|" + "---|" * len(METHODS))
    for n in args.labels:
        cells = [f"{covered[n][m] / args.repetitions:.1%} (width {np.mean(widths[n][m]):.3f})" for m in METHODS]
        print(f"| {n} | " + " | ".join(cells) + " |")
    if args.plot:
        plot(args, covered, widths)
    return 0


def plot(args, covered, widths) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for method, marker in zip(METHODS, "osd^"):
        left.plot(args.labels, [100 * covered[n][method] / args.repetitions for n in args.labels], marker=marker,
                  label=method)
        right.plot(args.labels, [np.mean(widths[n][method]) for n in args.labels], marker=marker, label=method)
    left.axhline(95, color="grey", linestyle="--", linewidth=1)
    left.set(xlabel="human labels", ylabel="coverage of the true rate (%)", ylim=(-2, 102),
             title=f"95 % intervals, {args.repetitions} runs each")
    right.set(xlabel="human labels", ylabel="mean interval width", title="width")
    left.legend(fontsize=8, loc="center right")
    fig.suptitle(f"lenient judge: {args.lenient:.0%} of unsupported claims called supported "
                 f"({args.claims} claims, true rate {args.rate})", fontsize=10)
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
