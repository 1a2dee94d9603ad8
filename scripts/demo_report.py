"""The demo's comparison tables, printed and written to docs/demo-results.md, never by hand.

``bash scripts/demo.sh`` runs it after the demo sweep (logged to ``sqlite:///mlflow.db``)::

    python scripts/demo_report.py [--tracking-uri sqlite:///mlflow.db] [--out docs/demo-results.md]

It prints what ``ragexp compare --sort hit_rate_at_5`` and ``ragexp compare --by-tag hit_rate_at_5``
print for the newest sweep's experiment (cost columns included), and writes the same output,
verbatim, to the page together with the sweep parent's ``best.<metric>`` tags (the winner and how
many runs are tied with it), which runs have traces, and where the numbers came from: the code
version, the embedding backend and the packages the runs recorded, and the date they finished. The
page names no path of the machine that ran it: overrides naming the store or a cache are left out.
Numbers are never retyped, so the page cannot drift from the output it quotes
(tests/test_demo_report.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
#: (heading the demo prints, ragexp arguments)
COMMANDS = (
    ("hit rate, recall, precision, nDCG at k=5 and MRR per configuration (* = best), cost columns",
     ("compare", "--sort", "hit_rate_at_5")),
    ("hit rate@5 per question category", ("compare", "--by-tag", "hit_rate_at_5")),
)
#: Overrides that name this machine's files, left out of the page.
MACHINE_KEYS = ("tracking.uri", "cache_dir", "hydra.")


def ragexp(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], env=env, capture_output=True, text=True,
                          check=True).stdout.rstrip()


def newest_sweep(client: MlflowClient):
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(experiments, filter_string="tags.`ragexp.kind` = 'sweep'",
                                 order_by=["start_time DESC"], max_results=1)
    if not parents:
        raise SystemExit(f"no sweep in {client.tracking_uri}: run bash scripts/demo.sh first")
    return parents[0]


def shown_overrides(overrides: str) -> str:
    """The sweep's overrides without those that name this machine's files (:data:`MACHINE_KEYS`)."""
    return " ".join(o for o in overrides.split() if not o.lstrip("+~").startswith(MACHINE_KEYS)) or "(none)"


def report(uri: str) -> tuple[list[tuple[str, str]], str]:
    """``(heading, output)`` of each command of :data:`COMMANDS`, and the page quoting them."""
    client = MlflowClient(uri)
    parent = newest_sweep(client)
    experiment = client.get_experiment(parent.info.experiment_id)
    children = client.search_runs([experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                                  max_results=1000)
    traced = [child.info.run_name for child in children
              if client.search_traces(locations=[experiment.experiment_id], run_id=child.info.run_id, max_results=1)]
    tags = children[0].data.tags if children else {}
    finished = dt.datetime.fromtimestamp((parent.info.end_time or parent.info.start_time) / 1000, dt.UTC)
    packages = ", ".join(f"{k.removeprefix('ragexp.pkg.')} {v}" for k, v in sorted(tags.items()) if k.startswith("ragexp.pkg."))
    printed = [(heading, ragexp(*command, "--experiment", experiment.name, "--tracking-uri", uri))
               for heading, command in COMMANDS]
    lines = [
        "# The demo sweep's results",
        "",
        "Written by `bash scripts/demo.sh` (through `scripts/demo_report.py`) from the sweep it ran; do not edit",
        "by hand. The tables are what the demo printed, verbatim; run ids, times and memory change from run to run.",
        f"Sweep overrides `{shown_overrides(parent.data.params.get('sweep.overrides', ''))}`.",
        f"Experiment `{experiment.name}`, sweep `{parent.info.run_name}` ({len(children)} runs), finished "
        f"{finished:%Y-%m-%d %H:%M} UTC; code `{tags.get('ragexp.code_version', '?')}`, embedding backend "
        f"`{tags.get('ragexp.embedding_backend', '?')}`; {packages}.",
        f"Traces (one per query, MLflow's GenAI pages) for {len(traced)} of the {len(children)} runs: "
        + (", ".join(f"`{name}`" for name in sorted(traced)) or "none") + ".",
        "",
        "## Best per headline metric (the sweep parent's `best.<metric>` tags)",
        "",
        *[f"- `{key.removeprefix('best.')}`: {value}" for key, value in sorted(parent.data.tags.items())
          if key.startswith("best.")],
    ]
    for (heading, output), (_, command) in zip(printed, COMMANDS):
        lines += ["", f"## `ragexp {' '.join(command)}`: {heading}", "", "```", output, "```"]
    return printed, "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "demo-results.md")
    args = parser.parse_args()
    printed, page = report(args.tracking_uri)
    for heading, output in printed:
        print(f"\n== {heading} ==\n{output}")
    args.out.write_text(page, encoding="utf-8")
    shown = args.out.resolve().relative_to(REPO) if args.out.resolve().is_relative_to(REPO) else args.out
    print(f"\nwrote {shown}: these tables, the best per metric and the versions that made them")


if __name__ == "__main__":
    main()
