"""What measuring cost adds to a run, side by side in one script: the demo sweep per config and a
SciFact run, each with ``cost.enabled=false`` and with the default cost measurement, interleaved.

Every run here uses a warm stage cache (one untimed run first), so retrieval is read back and the
cost measurement must load the index to size it: the most it can add. Printed per workload:
wall time off / on (each the median of its runs), the difference per config, and the time the
runs themselves recorded for measuring their cost (``time/cost_s``: index load and sizes, tokens,
peak RSS; the served-latency probe is off here, it is an option of its own and its time is
``time/cost_latency_s``). The 1-minute load average is printed beside every timing.

    nice -n 10 python -m benchmarks.bench_cost_overhead [--rounds 2] [--scifact ../shared/data/scifact]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_sweep import ENV, SWEEPS

REPO = Path(__file__).resolve().parents[1]


def run(workdir: Path, args: list[str], cost: bool, tag: str) -> tuple[float, list[float]]:
    """Wall seconds of one ``ragexp run`` and the ``cost_s`` each of its jobs recorded."""
    out = workdir / f"out-{tag}"
    command = [sys.executable, "-m", "ragexp.cli", "run", *args, "progress=false", f"cache_dir={workdir}/cache",
               f"tracking.uri=sqlite:///{workdir}/{tag}.db", "tracking.experiment=bench-cost",
               f"hydra.sweep.dir={out}", f"hydra.run.dir={out}", f"cost.enabled={str(cost).lower()}"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    costs = [json.loads(path.read_text())["meta"]["timings"]["cost_s"] for path in out.rglob("ragexp_results.json")]
    return wall, costs


def compare(name: str, workdir: Path, args: list[str], configs: int, rounds: int) -> None:
    run(workdir, args, cost=False, tag="warmup")  # the stage cache filled: every timed run reads it back
    walls: dict[bool, list[float]] = {False: [], True: []}
    recorded: list[float] = []
    for round_ in range(rounds):
        for cost in ((False, True) if round_ % 2 == 0 else (True, False)):
            load = os.getloadavg()[0]
            wall, costs = run(workdir, args, cost, f"r{round_}-{'on' if cost else 'off'}")
            walls[cost].append(wall)
            recorded += costs if cost else []
            print(f"{name}: round {round_ + 1}, cost {'on ' if cost else 'off'}: {wall:6.1f} s "
                  f"(load {load:.2f} -> {os.getloadavg()[0]:.2f})", flush=True)
    off, on = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"== {name} ({configs} configs): cost off {off:.1f} s, on {on:.1f} s (medians of {rounds}); "
          f"difference {(on - off) / configs:+.3f} s per config; measured inside the runs (time/cost_s): "
          f"median {statistics.median(recorded):.3f} s, max {max(recorded):.3f} s per config\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragexp-bench-cost-"))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", flush=True)
    (demo := workdir / "demo").mkdir(parents=True)
    compare("demo sweep", demo, ["-m", *SWEEPS["full"]], 24, args.rounds)
    (scifact := workdir / "scifact").mkdir()
    compare("SciFact BM25 run (5,183 abstracts, 300 queries)", scifact,
            ["dataset=beir", f"dataset.path={args.scifact.resolve()}", "dataset.split=test", "chunking=none",
             "retrieval=bm25"], 1, args.rounds)


if __name__ == "__main__":
    main()
