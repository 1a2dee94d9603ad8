"""What one MLflow trace per query costs, as the user meets it: the demo sweep and a SciFact run
through the real CLI, without traces and with them, interleaved in one script.

Every run uses one warm stage cache (filled by a first, untimed pass), so retrieval and
embedding are read back and the difference between the modes is the logging; every timed run
gets a fresh sqlite store. Modes (``tracking.traces``):

* demo sweep (``experiment=demo_sweep``, 18 configs x 148 queries): ``none``, ``best`` (the
  default: traces for the runs best or tied on hit rate@5, logged when the sweep ends) and ``all``;
* SciFact (BM25, whole documents, 300 test queries, ``scifact/`` of the shared data,
  :func:`benchmarks.shared_data_dir`, or ``--scifact DIR``): ``none`` and ``all`` (a single run logs its traces by default).

Printed per mode: wall and CPU seconds (user + system of the run's processes: on a loaded shared
machine the wall time grows with the load, the CPU time much less) of each repeat, the traces the store holds afterwards (counted in
the store by each run, its ``ragexp.traces`` tag), and the
overhead per traced query: (median wall - median wall of ``none``) / traces; the 1-minute load
average before and after each run is printed beside it (this machine is shared).

    nice -n 10 python -m benchmarks.bench_traces [--repeats 2] [--skip-demo] [--skip-scifact] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks import shared_data_dir
from ragexp.tracking.traces import TAG_TRACES

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
DEMO = ["experiment=demo_sweep"]


def scifact_args(path: Path) -> list[str]:
    return ["experiment=scifact", f"dataset.path={path}", "retrieval=bm25"]


def run_once(workdir: Path, args: list[str], mode: str, cache: Path, label: str) -> tuple[float, float, int]:
    """One ``ragexp run`` in a fresh store; returns (wall seconds, CPU seconds, traces in the store)."""
    store = Path(tempfile.mkdtemp(prefix=f"{label}-{mode}-", dir=workdir))
    command = [sys.executable, "-m", "ragexp.cli", "run", *args, f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
               f"tracking.traces={mode}", f"cache_dir={cache}", "progress=false"]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=store, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{label} {mode} failed:\n{proc.stderr[-3000:]}")
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments() if e.name != "Default"]
    traces = 0
    for run in client.search_runs(experiments, max_results=1000):  # what ragexp counted in the store per run
        written = run.data.tags.get(TAG_TRACES)
        traces += int(written.split(" of ")[0]) if written else 0
    print(f"  {label:8s} traces={mode:4s} {wall:7.1f} s wall {cpu:7.1f} s CPU  {traces:5d} traces  "
          f"load {load:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
    return wall, cpu, traces


def measure(workdir: Path, label: str, args: list[str], modes: list[str], repeats: int) -> None:
    cache = workdir / f"cache-{label}"
    print(f"{label}: warming the stage cache (untimed)", flush=True)
    run_once(workdir, args, "none", cache, label)
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    cpus: dict[str, list[float]] = {mode: [] for mode in modes}
    traced: dict[str, int] = {}
    for _ in range(repeats):
        for mode in modes:  # interleaved: the shared machine's speed drifts over minutes
            wall, cpu, traces = run_once(workdir, args, mode, cache, label)
            walls[mode].append(wall)
            cpus[mode].append(cpu)
            traced[mode] = traces
    base, base_cpu = statistics.median(walls["none"]), statistics.median(cpus["none"])
    print(f"{label}: medians per mode, and the overhead per traced query against traces=none")
    for mode in modes:
        wall, cpu = statistics.median(walls[mode]), statistics.median(cpus[mode])
        per_query = (f"{1000 * (wall - base) / traced[mode]:.0f} ms wall, {1000 * (cpu - base_cpu) / traced[mode]:.0f} ms CPU "
                     "per query" if traced[mode] else "-")
        print(f"  {mode:4s} {wall:7.1f} s wall ({', '.join(f'{w:.1f}' for w in walls[mode])}), {cpu:7.1f} s CPU  "
              f"{traced[mode]} traces  {per_query}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--scifact", type=Path, default=None)
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragexp-bench-traces-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"workdir {workdir}; {os.cpu_count()} CPUs")
    if not args.skip_demo:
        measure(workdir, "demo", DEMO, ["none", "best", "all"], args.repeats)
    if not args.skip_scifact:
        measure(workdir, "scifact", scifact_args(args.scifact or shared_data_dir() / "scifact"), ["none", "all"], args.repeats)


if __name__ == "__main__":
    main()
