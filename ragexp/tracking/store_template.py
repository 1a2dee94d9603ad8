"""A new sqlite store as a copy of an empty, migrated MLflow schema.

MLflow creates a sqlite store by running every schema migration (alembic, some 60 revisions):
about a second, plus alembic's import, paid by every new store (each test, each benchmark repeat,
a user's first run in a new folder). Instead, the first new store on a machine is migrated by
MLflow (in a subprocess, so no engine of this process stays on it) into a template, and every new
store is a copy of it. The template lives in ``$XDG_CACHE_HOME/ragexp`` (default ``~/.cache``) and
is named by MLflow's version, so an upgraded MLflow builds its own.

The template holds the migrated schema and MLflow's seed rows (schema version, default workspace),
minus the Default experiment: its artifact location names the folder the store was created in, so
it is deleted, and MLflow creates it on a copy's first open, as in a store it migrated itself.

Anything that goes wrong here (a read-only home, a full disk, a damaged template) only means MLflow
migrates the new store itself, as before; a template that fails its check is built again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow

from ragexp.runtime import file_lock
from ragexp.runtime.atomic_file import replacing

log = logging.getLogger(__name__)

_BUILD = "import sys; from mlflow.tracking import MlflowClient; MlflowClient(sys.argv[1]).search_experiments(max_results=1)"


def template_path() -> Path:
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "ragexp" / f"mlflow-{mlflow.__version__}-store.db"


def create_from_template(database: Path) -> bool:
    """Create the sqlite store ``database`` (which must not exist yet; the caller holds its
    creation lock) as a copy of the template, built first if needed; ``False`` when that was not
    possible and MLflow is to create the store itself."""
    template = template_path()
    try:
        with file_lock.locked(file_lock.open_lock_file(template.with_name(template.name + ".lock"))):
            if not is_valid(template):
                _build(template)
        with replacing(database) as partial:  # never a half-copied store under the store's name
            shutil.copyfile(template, partial)
    except (OSError, sqlite3.Error, subprocess.SubprocessError) as err:
        log.info("new MLflow store %s not created from the schema template (%s); MLflow migrates it", database, err)
        return False
    return True


def is_valid(template: Path) -> bool:
    """The template is an intact sqlite file at this MLflow's latest schema revision, holding
    every table of MLflow's models (:func:`required_tables`) and no experiment."""
    if not template.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{template}?mode=ro", uri=True)) as db:
            intact = db.execute("PRAGMA quick_check").fetchone() == ("ok",)
            versions = db.execute("SELECT version_num FROM alembic_version").fetchall()
            experiments = db.execute("SELECT count(*) FROM experiments").fetchone()[0]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return intact and versions == [(latest_revision(),)] and experiments == 0 and required_tables() <= tables


def latest_revision() -> str:
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


def required_tables() -> set[str]:
    """The tables MLflow's SQLAlchemy models map (a store lacking one breaks on first use)."""
    from mlflow.store.db.base_sql_model import Base
    from mlflow.store.tracking.dbmodels import models  # noqa: F401 - registers the tracking tables on Base

    return set(Base.metadata.tables)


def _build(template: Path) -> None:
    """Let MLflow migrate a new store (in a scratch folder, its working directory), delete the
    Default experiment, move the store into place."""
    template.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=template.parent, prefix=".building-") as scratch:
        building = Path(scratch) / "mlflow.db"
        subprocess.run([sys.executable, "-c", _BUILD, f"sqlite:///{building}"], cwd=scratch, check=True,
                       capture_output=True, timeout=300)
        with contextlib.closing(sqlite3.connect(building)) as db, db:
            db.execute("DELETE FROM experiment_tags WHERE experiment_id = 0")
            db.execute("DELETE FROM experiments WHERE experiment_id = 0")
        if not is_valid(building):
            raise sqlite3.DatabaseError(f"the store MLflow migrated at {building} does not check out")
        os.replace(building, template)
