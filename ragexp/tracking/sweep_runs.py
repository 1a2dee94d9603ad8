"""The runs a sweep's summary covers: one per job of the launch, whether the job ran or was reused.

A sweep job with ``resume=true`` is skipped when a FINISHED run already has its config hash and
cost settings (:func:`ragexp.jobs.job.run_job`); that run is the job's result, but it is a child of
the earlier launch's parent (a sweep relaunched after a fix or an interrupt, the demo run twice).
The job records it on the new parent (:func:`record_reused`: a tag ``ragexp.sweep.reused.<run id>``
holding the job's axis values), and the summary covers :func:`covered_runs`: the parent's own
children and the runs its jobs reused, each run once. So a relaunch summarises every job of the
same sweep and names the true best, and its description says which runs came from earlier
launches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ragexp.stored.limits import parse_json
from ragexp.tracking import store
from ragexp.tracking.run_names import AXIS_TAG_PREFIX
from ragexp.tracking.sweep_summary import children_of

TAG_REUSED_PREFIX = "ragexp.sweep.reused."


def record_reused(client: MlflowClient, parent_run_id: str, run_id: str, axis_values: Mapping[str, str]) -> None:
    """Say on the sweep's parent that one of its jobs reused the FINISHED run ``run_id``."""
    store.log_batched(client, parent_run_id, tags={f"{TAG_REUSED_PREFIX}{run_id}": json.dumps(dict(axis_values))})


def reused_ids(parent: Run) -> list[str]:
    """The runs the parent's jobs reused (:func:`record_reused`), in tag order."""
    return [key[len(TAG_REUSED_PREFIX):] for key in parent.data.tags if key.startswith(TAG_REUSED_PREFIX)]


def covered_runs(client: MlflowClient, parent_run_id: str) -> tuple[list[Run], list[str]]:
    """The parent's children, then the runs its jobs reused (each run once), and the ids of the
    reused ones. A reused run logged outside a sweep with these axes gets the job's axis values
    in memory (its ``axis.<key>`` tags; nothing is written to it)."""
    parent = client.get_run(parent_run_id)
    runs = children_of(client, parent_run_id)
    seen = {run.info.run_id for run in runs}
    reused = []
    for run_id in reused_ids(parent):
        if run_id in seen:
            continue
        run = client.get_run(run_id)
        values = parse_json(parent.data.tags[f"{TAG_REUSED_PREFIX}{run_id}"] or "{}", max_depth=2)
        for axis, value in values.items():
            run.data.tags.setdefault(f"{AXIS_TAG_PREFIX}{axis}", str(value))
        runs.append(run)
        reused.append(run_id)
        seen.add(run_id)
    return runs, reused
