"""Shared by the commands that read logged runs: tracking URI option, run lookup, results download.

A run is named on the command line as ``ragexp compare`` prints it: its id or a unique prefix of
at least :data:`MIN_PREFIX` hex digits. An argument that names a run is declared with
``type=run_ref`` (a run only) or ``type=run_or_file_ref`` (a run, or a results file when that
path exists), and ONE function turns each into the run's full id before the command runs
(:func:`resolve_run_refs`, called by :func:`ragexp.cli.main`): an ambiguous prefix is refused naming
the runs it starts, a missing one as "no run with id ...".
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ragexp.config.machine import default_tracking_uri
from ragexp.errors import RagexpInputError

if TYPE_CHECKING:  # MLflow is imported where a run is looked up: `ragexp evalset ...` starts without it
    from mlflow.tracking import MlflowClient

    from ragexp.evaluation.results import RunResults


def add_tracking_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri", default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)",
    )


def client_for(args: argparse.Namespace) -> tuple[MlflowClient, str]:
    """A client on an existing store (a reading command never creates an empty one)."""
    from ragexp.tracking import store

    uri = args.tracking_uri or default_tracking_uri()
    return store.connect(uri, create=False), uri


def get_run(client: MlflowClient, run_id: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise RagexpInputError(f"no run with id {run_id!r} in the tracking store {client.tracking_uri} (pass --tracking-uri "
                               "or set MLFLOW_TRACKING_URI to the store that holds it)", field="RUN_ID") from None


RUN_ID = re.compile(r"[0-9a-f]{32}")
#: The shortest run-id prefix taken (``compare`` prints 8); shorter ones name too many runs to be meant.
MIN_PREFIX = 4
RUN_ID_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},32}}")
#: How many of an ambiguous prefix's runs the refusal names.
SHOWN_CANDIDATES = 5


class RunRef(str):
    """A command-line argument naming a run (``type=run_ref``), resolved by :func:`resolve_run_refs`."""


class RunOrFileRef(RunRef):
    """A run, or a results file where the path exists (``type=run_or_file_ref``)."""


def run_ref(text: str) -> RunRef:
    return RunRef(text)


def run_or_file_ref(text: str) -> RunOrFileRef:
    return RunOrFileRef(text)


def resolve_run_refs(args: argparse.Namespace) -> None:
    """Replace every :class:`RunRef` in ``args`` (one value or a list) by the full id of the run
    it names in the store of ``args.tracking_uri`` (else the default one); a
    :class:`RunOrFileRef` naming an existing path, or one that cannot be a run id, stays as given
    (the results loader reads it, or says "no such file"), and so does a whole 32-digit id: the
    command checks its other arguments before it opens the store, and names a missing run itself."""
    from ragexp.tracking import store

    client = None
    for dest, value in vars(args).items():
        refs = value if isinstance(value, list) else [value]
        if not any(isinstance(ref, RunRef) for ref in refs):
            continue
        resolved = []
        for ref in refs:
            if isinstance(ref, RunOrFileRef) and (Path(ref).exists() or not RUN_ID_PREFIX.fullmatch(ref)):
                resolved.append(str(ref))
                continue
            if RUN_ID.fullmatch(ref):  # a whole id needs no store here: the command checks its own input first
                resolved.append(str(ref))
                continue
            if client is None:
                client = store.connect(getattr(args, "tracking_uri", None) or default_tracking_uri(), create=False)
            resolved.append(full_run_id(client, str(ref)))
        setattr(args, dest, resolved if isinstance(value, list) else resolved[0])


def full_run_id(client: MlflowClient, ref: str) -> str:
    """The id of the one run whose id is ``ref`` or starts with it; else one line: not a run id,
    no such run, or an ambiguous prefix with the runs it starts."""
    if not RUN_ID_PREFIX.fullmatch(ref):
        raise RagexpInputError(f"{ref!r} is not a run id: give the id or its first {MIN_PREFIX} or more characters "
                               "(lowercase hex), as `ragexp compare` prints them", field="RUN_ID")
    if RUN_ID.fullmatch(ref):
        return get_run(client, ref).info.run_id
    from mlflow.entities import ViewType

    experiments, token = [], None
    while True:  # every experiment, deleted ones too, a page at a time
        page = client.search_experiments(view_type=ViewType.ALL, max_results=1000, page_token=token)
        experiments += [e.experiment_id for e in page]
        token = page.token
        if not token:
            break
    found: list = []
    for start in range(0, len(experiments), 100):
        found += client.search_runs(experiments[start:start + 100], filter_string=f"attributes.run_id LIKE '{ref}%'",
                                    run_view_type=ViewType.ALL, max_results=SHOWN_CANDIDATES + 1)
    if not found:
        raise RagexpInputError(f"no run with id {ref!r} (nor one starting with it) in the tracking store "
                               f"{client.tracking_uri} (pass --tracking-uri or set MLFLOW_TRACKING_URI to the store "
                               "that holds it)", field="RUN_ID")
    if len(found) > 1:
        # a stored run name is shown as a repr: it prints no control characters
        shown = ", ".join(f"{run.info.run_id} ({run.info.run_name!r})" for run in found[:SHOWN_CANDIDATES])
        more = " and more" if len(found) > SHOWN_CANDIDATES else ""
        raise RagexpInputError(f"run id prefix {ref!r} is ambiguous: it starts {shown}{more}; give more characters",
                               field="RUN_ID")
    return found[0].info.run_id


def load_results(ref: str, tracking_uri: str | None = None) -> RunResults:
    """A results file path, or an MLflow run id (32 hex digits) whose ``ragexp_results.json`` is downloaded."""
    from ragexp.evaluation.results import ARTIFACT_NAME, RunResults
    from ragexp.tracking import store

    path = Path(ref)
    if path.exists() or not RUN_ID.fullmatch(ref):
        return RunResults.load(path)
    uri = tracking_uri or default_tracking_uri()
    get_run(store.connect(uri, create=False), ref)
    with tempfile.TemporaryDirectory(prefix="ragexp-") as scratch:
        return RunResults.load(store.download_artifact(ref, ARTIFACT_NAME, uri, dst_dir=Path(scratch)))
