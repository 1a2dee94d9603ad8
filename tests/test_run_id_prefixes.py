"""A run is named as ``ragexp compare`` prints it: every command that takes a run accepts the id's
first 8 characters (any unique prefix of 4 or more), refuses an ambiguous prefix naming the runs
it starts, and names a missing one as a run id ("no run with id ..."), never "no such file".

One tiny BM25 run with the extractive generator and the lexical judge (so the judge commands have
claims) is logged once; each command runs in-process on its prefix, and the store is asked for
that run's full id (a spy on ``MlflowClient.get_run``) before the command does its work.
"""

from __future__ import annotations

import csv
import secrets
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp import cli
from ragexp.commands._runs import MIN_PREFIX
from tests.helpers.cli import dataset_args, job_runs, ragexp
from tests.helpers.tiny_dataset import write_tiny_dataset

pytestmark = [pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """(folder, store URI, the run's id, corpus, eval set)."""
    folder = tmp_path_factory.mktemp("prefixes")
    corpus, evalset = write_tiny_dataset(folder)
    db = folder / "mlflow.db"
    ragexp(folder, "run", *dataset_args((corpus, evalset), db), "retrieval=bm25", "chunking=fixed", "chunking.size=80",
           "chunking.overlap=0", "generator=extractive", "+generator.min_overlap=0.1", "judge=lexical",
           "eval.bootstrap_resamples=200", f"cache_dir={folder / 'cache'}")
    _, _, (run,) = job_runs(db)
    labels = folder / "labels.csv"
    assert cli.main(["judge", "sample", run.info.run_id, "-n", "3", "--out", str(labels), "--tracking-uri",
                     f"sqlite:///{db}"]) == 0
    with labels.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:  # a reviewer who agrees with the judge
        row["human_label"] = row["judge_label"]
    with labels.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return folder, f"sqlite:///{db}", run.info.run_id, corpus, evalset


#: Every command that takes a run, with ``{run}`` where the run goes (``{folder}``: a scratch folder).
COMMANDS = {
    "compare": ["compare", "{run}"],
    "compare --per-query": ["compare", "--per-query", "{run}", "{full}"],  # refused after lookup: the same run twice
    "gate": ["gate", "--baseline", "{run}", "--candidate", "{run}"],
    "reproduce": ["reproduce", "{run}"],
    "traces": ["traces", "{run}"],
    "export": ["export", "{run}", "--run", "{folder}/run.trec", "--qrels", "{folder}/qrels.trec"],
    "judge sample": ["judge", "sample", "{run}", "-n", "2", "--out", "{folder}/sample.csv"],
    "judge review": ["judge", "review", "{run}", "-n", "2", "--labels", "{folder}/review.csv", "--port", "0"],
    "judge ppi": ["judge", "ppi", "{run}", "--labels", "{labels}", "--no-log"],
    "judge ppi --labels-from": ["judge", "ppi", "{full}", "--labels", "{labels}", "--labels-from", "{run}", "--no-log"],
    "judge agreement --run": ["judge", "agreement", "{labels}", "--run", "{run}"],
    "evalset annotate --from-run": ["evalset", "annotate", "{folder}/evalset.jsonl", "--corpus", "{corpus}",
                                    "--from-run", "{run}", "--queue-only", "--pipelines", "bm25"],
}


def argv(name: str, logged, folder: Path, ref: str) -> list[str]:
    root, uri, run_id, corpus, _ = logged
    values = {"run": ref, "full": run_id, "folder": str(folder), "labels": str(root / "labels.csv"), "corpus": str(corpus)}
    return [part.format(**values) for part in COMMANDS[name]] + ["--tracking-uri", uri]


@pytest.fixture()
def asked(monkeypatch):
    """The run ids the store is asked for (``MlflowClient.get_run``), and a judge review page that
    is not served (the command returns once it would serve)."""
    seen: list[str] = []
    get_run = MlflowClient.get_run

    def spy(self, run_id):
        seen.append(run_id)
        return get_run(self, run_id)

    monkeypatch.setattr(MlflowClient, "get_run", spy)
    monkeypatch.setattr("ragexp.web.app.serve", lambda app, sock, what: 0)
    return seen


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_that_takes_a_run_accepts_the_prefix_compare_prints(name, logged, asked, tmp_path, monkeypatch,
                                                                          capsys):
    root, _, run_id, _, evalset = logged
    (tmp_path / "evalset.jsonl").write_bytes(evalset.read_bytes())
    monkeypatch.chdir(tmp_path)
    code = cli.main(argv(name, logged, tmp_path, run_id[:8]))
    out, err = capsys.readouterr()
    # compare --per-query is refused before its runs are read; its message shows the prefix resolved
    assert run_id in asked or name == "compare --per-query", f"{name}: the store was never asked for run {run_id}\n{out[-2000:]}\n{err[-2000:]}"
    assert "no run with id" not in err and "not a run id" not in err and "no such file" not in err, err
    if name == "compare --per-query":
        assert code == 2 and f"got run {run_id} twice" in err  # the prefix was resolved to the run itself
    elif name == "gate":  # six paired queries are too few to decide: the gate compared the run with itself
        assert code == 2 and out.count(f"{run_id}  (eval set") == 2, out  # "baseline:  ID  (eval set ...)", candidate
    else:
        assert code == 0, f"{name}: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
    if name == "compare":
        assert f"[{run_id[:8]}" in out


@pytest.mark.parametrize("name", ["compare", "gate", "traces", "judge review", "judge ppi", "export",
                                  "evalset annotate --from-run", "reproduce"])
def test_a_missing_run_is_named_as_a_run_id(name, logged, asked, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    missing = "0123abcd" if not logged[2].startswith("0123abcd") else "fedc4321"
    code = cli.main(argv(name, logged, tmp_path, missing))
    err = capsys.readouterr().err
    assert code == 2 and f"no run with id '{missing}'" in err and "no such file" not in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("ref", ["abc", "xyz12345", "0123-abcd", "ABCDEF12"])
def test_what_cannot_be_a_run_id_is_refused_as_such(ref, logged, asked, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli.main(argv("reproduce", logged, tmp_path, ref))
    err = capsys.readouterr().err
    assert code == 2 and f"{ref!r} is not a run id" in err and f"first {MIN_PREFIX} or more characters" in err, err


def test_an_ambiguous_prefix_is_refused_naming_the_runs_it_starts(logged, tmp_path, monkeypatch, capsys):
    _, uri, run_id, _, _ = logged
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tiny").experiment_id
    prefix = "beef"
    made = []
    for name in ("twin-a", "twin-b"):  # MLflow draws a run id from uuid4: two runs whose ids start alike
        monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(prefix + secrets.token_hex(14)))
        made.append(client.create_run(experiment, run_name=name).info.run_id)
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert all(run.startswith(prefix) for run in made) and not run_id.startswith(prefix)
    for command in (["compare", prefix], ["gate", "--baseline", prefix, "--candidate", run_id], ["traces", prefix]):
        code = cli.main([*command, "--tracking-uri", uri])
        err = capsys.readouterr().err
        assert code == 2 and f"run id prefix '{prefix}' is ambiguous" in err, err
        assert all(f"{run} ('twin-" in err for run in made), err
    code = cli.main(["compare", made[0][:12], "--tracking-uri", uri])  # more characters: unique again
    assert code == 0, capsys.readouterr().err
