"""The test suite (or a part of it) on one pytest process vs on xdist workers, interleaved in one run.

Each round runs the same selection once serially (``-p no:xdist``) and once per worker count
(``-n N --dist loadfile``, what ``scripts/test.sh`` uses), in alternating order, each in a fresh
process; it prints the wall times, the children's CPU seconds (user + sys, which load does not
inflate much) and the 1-minute load average before each run, then the median ratio
serial / parallel. The machine is shared: only ratios from the same run mean anything.

    python -m benchmarks.bench_test_workers [--rounds 2] [--workers 2] [-- PYTEST_ARGS ...]

Default selection: the fast lane (``-m "not slow and not browser"``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
FAST_LANE = ["-m", "not slow and not browser"]


def timed_pytest(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, children's CPU seconds and the exit code of ``pytest args`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=REPO, env=ENV,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("pytest_args", nargs="*", help="the selection (after --); default: the fast lane")
    options = parser.parse_args()
    selection = options.pytest_args or FAST_LANE
    sides = {"serial": ["-p", "no:xdist"], **{f"-n {n}": ["-n", str(n), "--dist", "loadfile"] for n in options.workers}}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    print(f"selection: {' '.join(selection)}; {os.cpu_count()} cores")
    for round_no in range(options.rounds):
        order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
        for name in order:
            load = os.getloadavg()[0]
            wall, cpu, code = timed_pytest([*sides[name], *selection])
            walls[name].append(wall)
            print(f"round {round_no + 1} {name:>7}: wall {wall:7.1f} s  cpu {cpu:7.1f} s  load before {load:5.2f}"
                  f"  exit {code}", flush=True)
    serial = statistics.median(walls["serial"])
    for name in sides:
        if name != "serial":
            print(f"median wall serial / {name}: {serial / statistics.median(walls[name]):.2f}x")


if __name__ == "__main__":
    main()
