"""``ragexp traces RUN_ID...``: log one MLflow trace per query of runs already in the store.

For runs logged without traces: a sweep's runs other than the best and tied ones
(``tracking.traces=best``), runs of ``tracking.traces=none``, runs from before ragexp logged traces.
Each run's saved config is read through the one gate and its data prepared as it was
(:mod:`ragexp.tracking.logged_traces`); a run whose eval set changed since is refused, a run that
already has traces is skipped. The store is this machine's (``--tracking-uri``, else
``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``); the stage cache is this machine's.
"""

from __future__ import annotations

import argparse

from ragexp.commands._runs import add_tracking_argument, client_for, get_run, run_ref


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", nargs="+", metavar="RUN_ID", type=run_ref, help="run ids or unique prefixes of them")
    add_tracking_argument(parser)


def run(args: argparse.Namespace) -> int:
    from ragexp.config.machine import local_cache_dir
    from ragexp.tracking.logged_traces import has_traces, prepared_cache, trace_logged_run

    client, uri = client_for(args)
    runs = [get_run(client, run_id) for run_id in args.run_ids]
    prepare = prepared_cache(local_cache_dir())
    for run in runs:
        name = run.info.run_name or run.info.run_id
        if has_traces(client, run.info.run_id):
            print(f"{name} ({run.info.run_id}): already has traces, skipped")
            continue
        written = trace_logged_run(client, run.info.run_id, local_cache_dir(), prepare=prepare)
        print(f"{name} ({run.info.run_id}): {written} traces logged to {uri}")
    return 0
