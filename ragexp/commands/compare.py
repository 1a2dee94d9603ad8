"""``ragexp compare``: runs side by side in the terminal, best value per metric marked ``*``."""

from __future__ import annotations

import argparse
import re

from ragexp.commands._runs import add_tracking_argument, client_for, get_run
from ragexp.errors import RagexpInputError
from ragexp.summary import format_table, headline_metrics
from ragexp.tracking import store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to compare (default: all job runs of --experiment)")
    parser.add_argument("--experiment", help="experiment name (default: the newest experiment with ragexp runs)")
    parser.add_argument("--metrics", help="comma-separated metric keys (default: headline metrics at k=5)")
    parser.add_argument("--by-tag", metavar="METRIC", help="instead: METRIC per eval-set tag (category) for each run")
    parser.add_argument("--sort", metavar="METRIC", help="sort runs by METRIC, best first")
    add_tracking_argument(parser)


def _job_runs(client, args):
    if args.run_ids:
        return [get_run(client, run_id) for run_id in args.run_ids]
    if args.experiment:
        experiment = client.get_experiment_by_name(args.experiment)
        if experiment is None:
            names = [e.name for e in client.search_experiments()]
            raise RagexpInputError(f"no experiment {args.experiment!r}; known: {', '.join(names) or 'none'}", field="--experiment")
        experiments = [experiment]
    else:
        experiments = sorted(client.search_experiments(), key=lambda e: e.last_update_time or 0, reverse=True)
    for experiment in experiments:
        runs = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`{store.TAG_KIND}` = 'job'", order_by=["attributes.start_time ASC"],
            max_results=5000,
        )
        if runs:
            return runs
    raise RagexpInputError("no ragexp runs found; run `ragexp run` first", field="--experiment")


_HIT_RATE_AT = re.compile(r"hit_rate_at_(\d+)")  # not hit_rate_at_5_ci_low


def run(args: argparse.Namespace) -> int:
    client, _ = client_for(args)
    runs = _job_runs(client, args)
    names = []
    rows: dict[str, dict[str, float]] = {}
    for r in runs:
        label = f"{r.info.run_name} [{r.info.run_id[:8]}]"
        names.append(label)
        rows[label] = dict(r.data.metrics)
    if args.by_tag:
        tags = sorted({key.split(".")[1] for row in rows.values() for key in row
                       if key.startswith("tag.") and key.endswith(f".{args.by_tag}")})
        if not tags:
            raise RagexpInputError(f"no per-tag values of {args.by_tag!r} in these runs", field="--by-tag")
        table_rows = {n: {t: rows[n].get(f"tag.{t}.{args.by_tag}") for t in tags} for n in names}
        print(f"{args.by_tag} per tag")
        print(format_table(names, table_rows, tags))
        return 0
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    else:
        ks = sorted({int(match[1]) for row in rows.values() for key in row if (match := _HIT_RATE_AT.fullmatch(key))})
        metrics = headline_metrics(ks or [5], {k: 0.0 for row in rows.values() for k in row})
    if args.sort:
        names.sort(key=lambda n: rows[n].get(args.sort, float("-inf")), reverse=True)
    print(format_table(names, rows, metrics))
    return 0
