"""A new sqlite store first touched by several ``ragexp run`` processes at once loses no run.

Before :func:`ragexp.tracking.store.connect` created the store under a file lock, two processes
migrating the same new file raced (``table experiments already exists``, ``duplicate column
name``): tracebacks, exit 1, runs lost (3 of 4 in a manual try). Here four processes start
together on a fresh store, three times over; every one must exit 0 with its run FINISHED. The
first time, no schema template exists yet (:mod:`ragexp.tracking.store_template`): the four also
race to build it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from ragexp.errors import RagexpInputError
from ragexp.tracking import store, store_template
from tests.helpers.cli import ENV

PROCESSES = 4
REPEATS = 3
CHUNKINGS = ("fixed", "recursive", "sentence", "none")  # four configs: four runs, all BM25 (no model to load)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_four_processes_on_a_fresh_sqlite_store_lose_no_run(tiny_dataset, tmp_path):
    corpus, evalset = tiny_dataset
    lost, failures = [], []
    env = {**ENV, "XDG_CACHE_HOME": str(tmp_path / "cache-home")}  # no template yet
    for repeat in range(REPEATS):
        db = tmp_path / f"fresh-{repeat}" / "mlflow.db"  # a folder that does not exist yet either
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "ragexp.cli", "run", "dataset=evalset", f"dataset.corpus={corpus}",
                 f"dataset.evalset={evalset}", f"tracking.uri=sqlite:///{db}", "tracking.experiment=race",
                 "progress=false", "retrieval=bm25", f"chunking={chunking}", f"cache_dir={tmp_path / f'cache-{i}'}",
                 f"hydra.run.dir={tmp_path / f'out-{repeat}-{i}'}", "eval.bootstrap_resamples=100"],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for i, chunking in enumerate(CHUNKINGS[:PROCESSES])
        ]  # fmt: skip
        outcomes = [(p.wait(timeout=900), p.stderr.read()) for p in processes]
        for process in processes:
            process.stdout.close()
            process.stderr.close()
        client = MlflowClient(f"sqlite:///{db}")
        experiment = client.get_experiment_by_name("race")
        runs = client.search_runs([experiment.experiment_id]) if experiment else []
        finished = sorted(r.data.params["chunking.name"] for r in runs if r.info.status == "FINISHED")
        print(f"repeat {repeat}: exit codes {[code for code, _ in outcomes]}, FINISHED runs {finished}")
        lost.append(PROCESSES - len(finished))
        failures += [stderr[-1500:] for code, stderr in outcomes if code != 0 or "Traceback" in stderr]
    print(f"runs lost per repeat: {lost}")
    assert store_template.is_valid(tmp_path / "cache-home" / "ragexp" / store_template.template_path().name)
    assert lost == [0] * REPEATS and failures == [], failures[:1]


def test_reading_commands_never_create_a_store(tmp_path):
    missing = tmp_path / "nowhere" / "mlflow.db"
    with pytest.raises(RagexpInputError, match=r"no MLflow store at .*nowhere/mlflow\.db.*ragexp run") as caught:
        store.connect(f"sqlite:///{missing}", create=False)
    assert caught.value.field == "tracking.uri"
    assert not missing.exists() and not missing.parent.exists()
    store.connect(f"sqlite:///{missing}")  # the default creates it, schema and all
    assert missing.stat().st_size > 0
    store.connect(f"sqlite:///{missing}", create=False).search_experiments()


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("file:///tmp/mlruns", "MLflow's file store"),
        ("mlruns", "MLflow's file store"),
        ("sqlite:////etc/passwd/m.db", "/etc/passwd is a file, not a folder"),
        ("postgresql://ragexp@127.0.0.1:9/mlflow", "the database driver for postgresql://ragexp@127.0.0.1:9/mlflow"),
        ("http://user:hunter2@127.0.0.1:9", "URL credentials (user:password@) (not shown)"),
    ],
)
def test_unusable_tracking_uris_are_one_line_naming_the_uri(uri, message):
    with pytest.raises(RagexpInputError) as caught:
        store.check_tracking_uri(uri)
    assert message in caught.value.message and caught.value.field == "tracking.uri"
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_sqlite_file_in_a_new_folder_is_fine(tmp_path):
    assert store.check_tracking_uri(f"sqlite:///{tmp_path / 'a' / 'b' / 'm.db'}") == tmp_path / "a" / "b" / "m.db"
    assert store.check_tracking_uri("sqlite://") is None and store.check_tracking_uri("http://127.0.0.1:5000") is None
