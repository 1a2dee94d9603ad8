"""A new sqlite store copied from the schema template is the store MLflow would have migrated
(:mod:`ragexp.tracking.store_template`), and a missing, damaged or unwritable template only means
MLflow migrates the store itself."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragexp.tracking import store, store_template


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root (the Default experiment's) is ./mlruns
    return tmp_path / "xdg"


def clauses(sql: str | None) -> list[str]:
    """A CREATE statement's clauses, sorted: MLflow's migrations write a table's constraints in an
    order that varies with Python's string hashing (two migrations of one MLflow differ)."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def contents(database: Path) -> dict[str, object]:
    """Schema, schema version and every seed row (the Default experiment without its timestamps)."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        return {
            "schema": sorted((kind, name, table, clauses(sql))
                             for kind, name, table, sql in db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
            "version": db.execute("SELECT version_num FROM alembic_version").fetchall(),
            "workspaces": db.execute("SELECT * FROM workspaces").fetchall(),
            "experiments": db.execute(
                "SELECT experiment_id, name, artifact_location, lifecycle_stage, workspace FROM experiments").fetchall(),
            "experiment_tags": db.execute("SELECT * FROM experiment_tags").fetchall(),
        }


def test_a_store_copied_from_the_template_is_the_store_mlflow_migrates(cache_home, tmp_path):
    migrated = tmp_path / "migrated.db"
    MlflowClient(f"sqlite:///{migrated}").search_experiments()  # MLflow creates and migrates it
    copied = tmp_path / "new" / "mlflow.db"
    client = store.connect(f"sqlite:///{copied}")  # the first new store builds the template
    assert store_template.is_valid(store_template.template_path())
    assert contents(copied) == contents(migrated)
    assert contents(copied)["experiments"] == [(0, "Default", str(tmp_path / "mlruns" / "0"), "active", "default")]

    second = tmp_path / "second.db"
    assert store_template.create_from_template(second)  # later stores are copies of it
    assert contents(second)["schema"] == contents(migrated)["schema"] and contents(second)["experiments"] == []
    experiment_id = store.ensure_experiment(client, "works")
    run = client.create_run(experiment_id)
    client.log_metric(run.info.run_id, "hit_rate_at_5", 0.5)
    client.set_terminated(run.info.run_id)
    assert client.get_run(run.info.run_id).data.metrics == {"hit_rate_at_5": 0.5}


@pytest.fixture(scope="module")
def intact_template(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("intact")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        assert store_template.create_from_template(folder / "first.db")
        return store_template.template_path().read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated", "with_an_experiment", "without_a_table", "old_revision"])
def test_a_damaged_template_is_built_again(cache_home, tmp_path, damage, intact_template):
    template = store_template.template_path()
    template.parent.mkdir(parents=True)
    intact = intact_template
    template.write_bytes(intact)
    assert store_template.is_valid(template)
    if damage == "garbage":
        template.write_bytes(b"not a database" * 100)
    elif damage == "truncated":
        template.write_bytes(intact[: len(intact) // 3])
    elif damage == "without_a_table":  # valid sqlite, version and experiments tables intact: issue #24
        with contextlib.closing(sqlite3.connect(template)) as db, db:
            db.execute("DROP TABLE latest_metrics")
    elif damage == "old_revision":
        with contextlib.closing(sqlite3.connect(template)) as db, db:
            db.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")
    else:
        with contextlib.closing(sqlite3.connect(template)) as db, db:
            db.execute("INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, workspace) "
                       "VALUES (7, 'leftover', '/elsewhere/7', 'active', 'default')")
    assert not store_template.is_valid(template)
    database = tmp_path / "after" / "mlflow.db"
    store.connect(f"sqlite:///{database}")
    assert store_template.is_valid(template)
    client = MlflowClient(f"sqlite:///{database}")
    assert [e.name for e in client.search_experiments()] == ["Default"]
    run = client.create_run("0")  # the new store works: a run and its metric are written
    client.log_metric(run.info.run_id, "m", 1.0)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 1.0}


def test_without_a_usable_cache_mlflow_migrates_the_store(tmp_path, monkeypatch, caplog):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    database = tmp_path / "store" / "mlflow.db"
    with caplog.at_level("INFO", logger="ragexp.tracking.store_template"):
        client = store.connect(f"sqlite:///{database}")
    assert "not created from the schema template" in caplog.text
    assert [e.name for e in client.search_experiments()] == ["Default"]
    assert not list(database.parent.glob(".*partial"))
