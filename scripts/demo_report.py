"""The demo's comparison tables, printed and written to docs/demo-results.md, never by hand.

``bash scripts/demo.sh`` runs it after the demo sweep (logged to ``sqlite:///mlflow.db``)::

    python scripts/demo_report.py [--tracking-uri sqlite:///mlflow.db] [--out docs/demo-results.md]

It prints what ``ragexp compare --sort hit_rate_at_5`` and ``ragexp compare --by-tag hit_rate_at_5``
print for the newest sweep's experiment (cost columns included), and writes the same output,
verbatim, to the page together with the sweep parent's ``best.<metric>`` tags (the winner and how
many runs are tied with it), which runs have traces, and where the numbers came from: the code
version, the embedding backend and the packages the runs recorded, and the date they finished. The
page names no path of the machine that ran it: overrides naming the store or a cache are left out,
other absolute paths cut to their last name.
Numbers are never retyped, so the page cannot drift from the output it quotes
(tests/test_demo_report.py).

``--check`` writes nothing: it regenerates the page from the store and exits 1, with a diff, when
it differs from ``--out`` other than in what changes from run to run (:func:`modulo_times`: run
ids, the sweep's name and date, the code version, the served-latency and memory columns).
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import os
import re
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


#: Columns of ``ragexp compare`` measured in time or memory: they change from run to run.
RUN_TO_RUN_COLUMNS = ("p95 ms", "peak RSS MB")
RUN_TO_RUN = (
    (re.compile(r"\b[0-9a-f]{8}\b(?=\]|\))"), "<run>"),  # [c4b8e6b6], (run c4b8e6b6)
    (re.compile(r"sweep `sweep [^`]*`"), "sweep `<name>`"),
    (re.compile(r"finished \d{4}-\d\d-\d\d \d\d:\d\d UTC"), "finished <date>"),
    (re.compile(r"code `[^`]*`"), "code `<version>`"),
)


def modulo_times(page: str) -> str:
    """``page`` with what changes from one demo run to the next masked (:data:`RUN_TO_RUN`, and the
    cells of the :data:`RUN_TO_RUN_COLUMNS` of every table, found by the table's dashed rule)."""
    lines = page.splitlines()
    masked_spans: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        if re.fullmatch(r"-+(  -+)*", line) and i > 0:  # a table's rule: its header is the line above
            spans = [m.span() for m in re.finditer(r"-+", line)]
            masked_spans = [(a, b + 1) for a, b in spans if lines[i - 1][a:b].strip() in RUN_TO_RUN_COLUMNS]  # + its marker (*)
            continue
        if not line.strip() or line.startswith(("```", "#", "≈", "at n=", "cost:")):
            masked_spans = []
        for a, b in masked_spans:
            line = line[:a] + "~" * (b - a) + line[b:]
        lines[i] = line
    text = "\n".join(lines)
    for pattern, replacement in RUN_TO_RUN:
        text = pattern.sub(replacement, text)
    return text


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
    """The sweep's overrides without those that name this machine's store or caches
    (:data:`MACHINE_KEYS`), and any other absolute path cut to ``…/<its last name>``."""
    shown = []
    for override in overrides.split():
        key, _, value = override.partition("=")
        if key.lstrip("+~").startswith(MACHINE_KEYS):
            continue
        shown.append(f"{key}=…/{Path(value).name}" if value.startswith(("/", "~", "file:")) else override)
    return " ".join(shown) or "(none)"


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
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when --out differs from the store's page other than in times")
    args = parser.parse_args()
    printed, page = report(args.tracking_uri)
    if args.check:
        have, want = modulo_times(args.out.read_text(encoding="utf-8")), modulo_times(page)
        if have != want:
            sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True), str(args.out), "the store"))
            raise SystemExit(1)
        print(f"{args.out} is the store's newest sweep, other than in run ids, times and memory")
        return
    for heading, output in printed:
        print(f"\n== {heading} ==\n{output}")
    args.out.write_text(page, encoding="utf-8")
    shown = args.out.resolve().relative_to(REPO) if args.out.resolve().is_relative_to(REPO) else args.out
    print(f"\nwrote {shown}: these tables, the best per metric and the versions that made them")


if __name__ == "__main__":
    main()
