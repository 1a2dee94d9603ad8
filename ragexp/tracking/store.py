"""MLflow: connecting to the store, naming experiments, and logging one evaluated run.

Everything a run logs is computed before the run is opened, then written in one block, so a
crash leaves a FAILED run (or none), never a half-logged FINISHED one. Tags written on every
run (``ragexp.*``) are what ``reproduce``, ``compare``, resumable sweeps and the gate read.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import tempfile
import unicodedata
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path

import mlflow
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repo import ArtifactRepository
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient

from ragexp import __version__
from ragexp.config.machine import default_tracking_uri
from ragexp.config.secrets import WHERE_URL_CREDENTIALS_GO, secret_kind
from ragexp.errors import RagexpInputError
from ragexp.runtime import file_lock
from ragexp.stored.urls import HTTP_SCHEMES, Url, canonical_url, parse_canonical
from ragexp.tracking import store_template

TAG_CONFIG_HASH = "ragexp.config_hash"
#: What the run measured of its cost (:func:`ragexp.cost.settings.settings_key`); resume matches it too.
TAG_COST_SETTINGS = "ragexp.cost_settings"
TAG_CORPUS_FP = "ragexp.corpus_fingerprint"
TAG_EVALSET_FP = "ragexp.evalset_fingerprint"
TAG_CODE_VERSION = "ragexp.code_version"
TAG_VERSION = "ragexp.version"
TAG_KIND = "ragexp.kind"
TAG_REPRODUCES = "ragexp.reproduces"
TAG_CONFIG_SOURCE = "ragexp.config_source"  # where the job's config came from (ragexp.evaluation.job_spec.ConfigSource)
TAG_EVALSET_NAME = "ragexp.evalset"
TAG_GOLD_LEVEL = "ragexp.gold_level"
TAG_SWEEP_AXES = "ragexp.sweep_axes"
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"
#: MLflow truncates a tag value (a run's description too) beyond this many characters.
DESCRIPTION_LIMIT = 8000
#: MLflow's run type; on "evaluation" runs the UI opens their sweep parent expanded on a first visit.
RUN_TYPE_TAG = "mlflow.runType"
RUN_TYPE_EVALUATION = "evaluation"
CONFIG_ARTIFACT = "config/resolved.yaml"
OVERRIDES_ARTIFACT = "config/overrides.yaml"
PER_QUERY_TABLE = "per_query.json"
#: MLflow's per-call limits of ``log_batch``.
BATCH_PARAMS, BATCH_TAGS, BATCH_TOTAL = 100, 100, 1000
TRACKED_PACKAGES = (
    "mlflow", "torch", "sentence-transformers", "transformers", "faiss-cpu", "rank-bm25", "numpy", "hydra-core",
    "PyStemmer",
)


@contextlib.contextmanager
def _http_limits(timeout_s: float) -> Iterator[None]:
    """Bound MLflow's HTTP client for one probe: one attempt, ``timeout_s`` seconds."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")}
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, int(timeout_s)))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_connected: set[str] = set()  # URIs this process has connected to (the store exists and answered)


def check_store(uri: str) -> None:
    """What :func:`connect` (``create=True``) checks without touching the store: the URI, and an
    existing sqlite file being a store this process can write. A run calls it before it loads data
    (which fills the stage cache) and connects only after the data passed, so neither a bad store nor
    bad data leaves anything behind."""
    if uri in _connected:
        return
    database = check_tracking_uri(uri)
    if database is not None and database.exists():
        _check_is_a_store(database, uri)
        _check_writable(database, uri)


def connect(uri: str, timeout_s: float = 10.0, *, create: bool = True) -> MlflowClient:
    """Point MLflow at ``uri`` and prove the store answers, or fail with one line naming the URI.

    The URI is checked first (:func:`check_tracking_uri`). A new sqlite store is created (a copy
    of the migrated schema, :mod:`~ragexp.tracking.store_template`) under an exclusive lock on
    ``<file>.lock`` beside it, so processes that first touch a new store at the same moment create
    it once and all see the whole schema (without the lock, two migrations race: ``table
    experiments already exists``). ``create=False`` (commands that only read: compare, export,
    gate, reproduce, ui) refuses a sqlite file that does not exist instead of creating an empty
    store; ``create=True`` (commands that log) refuses a store file it could not write to. A URI
    this process has already connected to is not checked again (each job of a sweep
    connects; a store that goes away later fails the job's logging, which retries and then names
    the store).
    """
    if uri in _connected:
        mlflow.set_tracking_uri(uri)
        return MlflowClient(tracking_uri=uri)
    database = check_tracking_uri(uri)
    if database is not None and not create and not database.is_file():
        raise RagexpInputError(
            f"no MLflow store at {database} (from {uri}); check the path, or run `ragexp run` first to create one",
            field="tracking.uri",
        )
    if database is not None and database.exists():
        _check_is_a_store(database, uri)
        if create:
            _check_writable(database, uri)
    try:
        with _creation_lock(database):
            if database is not None and create and not database.exists():
                store_template.create_from_template(database)
            mlflow.set_tracking_uri(uri)
            client = MlflowClient(tracking_uri=uri)
            with _http_limits(timeout_s):
                client.search_experiments(max_results=1)
    except RagexpInputError:
        raise
    except Exception as err:  # any transport or store error means "unreachable"
        reason = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
        raise RagexpInputError(f"cannot reach the MLflow tracking store at {uri}: {reason}", field="tracking.uri") from None
    _connected.add(uri)
    return client


FILE_STORE_HELP = "use sqlite:///PATH/mlflow.db or an MLflow server (http://HOST:PORT)"
_DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


def check_tracking_uri(uri: str) -> Path | None:
    """Refuse, in one line naming the URI, what MLflow would fail on with a traceback; returns
    the sqlite file of a ``sqlite:///`` URI (``None`` for other stores and in-memory sqlite).

    - MLflow's file store (a plain path or a ``file:`` URI) is in maintenance mode: refused.
    - credentials in the URI (``scheme://user:pass@host``) would be logged with the config: refused.
    - an ``http(s)`` server URI not in the one canonical form (:mod:`ragexp.stored.urls`): refused.
    - a database URI whose driver is not installed (``postgresql://`` without psycopg): named.
    - a sqlite file that cannot be created (its folder is a file, or not writable): named.
    """
    scheme = uri.split(":", 1)[0].lower() if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", uri) else ""
    if scheme in ("", "file"):  # a path or file:...
        raise RagexpInputError(
            f"{uri!r} is MLflow's file store, which ragexp does not use (it is in maintenance mode); {FILE_STORE_HELP}",
            field="tracking.uri",
        )
    if kind := secret_kind(uri):
        raise RagexpInputError(f"the URI contains {kind} (not shown); {WHERE_URL_CREDENTIALS_GO}", field="tracking.uri")
    if scheme in HTTP_SCHEMES:  # a tracking server receives this machine's MLFLOW_TRACKING_* credentials
        canonical_url(uri, field="tracking.uri")
        return None
    if scheme.split("+", 1)[0] not in _DATABASE_SCHEMES:
        return None
    from sqlalchemy.engine import make_url

    try:
        url = make_url(uri)
        url.get_dialect().import_dbapi()
    except ImportError as err:
        raise RagexpInputError(
            f"the database driver for {uri} is not installed ({err}); install it (e.g. pip install psycopg2-binary "
            "for PostgreSQL, pymysql for MySQL) or use sqlite:///mlflow.db",
            field="tracking.uri",
        ) from None
    except Exception as err:  # noqa: BLE001 - SQLAlchemy raises several types for a malformed URL
        raise RagexpInputError(f"not a valid database URI {uri!r}: {err}", field="tracking.uri") from None
    if scheme != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    database = Path(url.database)
    _check_creatable(database, uri)
    return database


SQLITE_HEADER = b"SQLite format 3\x00"


def _check_is_a_store(database: Path, uri: str) -> None:
    """An existing file becomes no store: sqlite would turn an empty file (a package's
    ``__init__.py``) into a database and MLflow migrate it; only a sqlite database is opened."""
    if not database.is_file():
        raise RagexpInputError(f"{database} (from {uri}) is not a regular file (a device, FIFO or socket); name a sqlite "
                               "file", field="tracking.uri")
    try:
        with database.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as err:
        raise RagexpInputError(f"cannot read the sqlite store {database} (from {uri}): {err.strerror}",
                               field="tracking.uri") from None
    if header != SQLITE_HEADER:
        raise RagexpInputError(f"{database} (from {uri}) exists and is not a sqlite database; refusing to turn it into "
                               "an MLflow store: name a new file or an existing store", field="tracking.uri")


def _check_writable(database: Path, uri: str) -> None:
    """A store a run will log to must be writable now, not only after the run's work."""
    if not os.access(database, os.W_OK) or not os.access(database.absolute().parent, os.W_OK | os.X_OK):
        raise RagexpInputError(f"the sqlite store {database} (from {uri}) is not writable (a read-only file or file "
                               "system, or a read-only folder: sqlite writes its journal beside the file); nothing "
                               "could be logged there", field="tracking.uri")


def _check_creatable(database: Path, uri: str) -> None:
    if database.is_dir():
        raise RagexpInputError(f"{database} (from {uri}) is a folder, not a sqlite file; name a file such as "
                               f"{database / 'mlflow.db'}", field="tracking.uri")
    if database.exists():
        return
    ancestor = database.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise RagexpInputError(f"cannot create the sqlite store {database} (from {uri}): {ancestor} is a file, not a "
                               "folder; put the store in a writable folder", field="tracking.uri")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise RagexpInputError(f"cannot create the sqlite store {database} (from {uri}): {ancestor} is not writable; "
                               "put the store in a writable folder", field="tracking.uri")


@contextlib.contextmanager
def _creation_lock(database: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<database>.lock`` (created beside it); no lock for a
    store that is not a sqlite file, or an existing one whose folder is read-only."""
    if database is None:
        yield
        return
    try:
        handle = file_lock.open_lock_file(database.with_name(database.name + ".lock"))
    except OSError as err:
        if not database.is_file():
            raise RagexpInputError(f"cannot create the sqlite store {database}: {err.strerror}", field="tracking.uri") from None
        yield  # an existing store in a read-only folder: nothing will be created
        return
    with file_lock.locked(handle):
        yield


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """The id of experiment ``name``, created if missing (safe when workers race); an existing
    one must keep its artifacts where this store serves them (:func:`check_artifact_location`)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        check_artifact_location(experiment.artifact_location, client.tracking_uri, f"experiment {name!r}")
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        check_artifact_location(experiment.artifact_location, client.tracking_uri, f"experiment {name!r}")
        return experiment.experiment_id


#: Artifact URI schemes MLflow sends over HTTP; every other scheme but a local path or ``file:`` is refused.
ARTIFACT_HTTP_SCHEMES = ("http", "https", "mlflow-artifacts")
#: This machine's file system in the forms MLflow itself stores (an absolute path, ``file:/``,
#: ``file:///``): one ``/`` then a character other than ``/`` (``//host/share`` is a network path).
_LOCAL_LOCATION = re.compile(r"(?:file:(?://)?)?/(?!/)")


def check_artifact_location(artifact_uri: object, tracking_uri: str, owner: str) -> str:
    """The location to use for ``artifact_uri``: credentials follow the machine, not the data.
    MLflow sends this machine's ``MLFLOW_TRACKING_*`` credentials to an ``http(s)`` artifact
    location, and a store writer can set any location on an experiment or run. Artifacts may
    therefore only stay on this machine's file system or go to the tracking server itself, and
    the text is accepted only in one canonical form, exactly, so that MLflow reads it as it was
    checked (``urllib.parse``, under MLflow, drops a leading space or control character and every
    tab or newline before it reads the scheme: `` http://evil/`` is a path to a prefix check but
    ``http://evil/`` to MLflow):

    - no control character (C0, DEL, C1) anywhere and no white space at either end;
    - this machine: an absolute path, ``file:/PATH`` or ``file:///PATH`` (not ``//host/...``);
    - the tracking server: a URL in the canonical form of :mod:`ragexp.stored.urls` whose origin
      as MLflow connects to it (:func:`artifact_origin`) is the tracking URI's.

    Anything else is refused, naming ``owner`` (the experiment or run that holds the location).
    Returns the text checked, the one to hand MLflow."""
    location = artifact_uri if isinstance(artifact_uri, str) else ""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in location)
    refusal = (f"{owner} keeps its artifacts at {shown or repr(artifact_uri)}, which is not this machine's file system "
               f"nor the tracking server {tracking_uri}; refusing to send or fetch anything there (MLflow would send "
               "this machine's MLFLOW_TRACKING_* credentials with it)")
    if not location:
        raise RagexpInputError(f"{refusal}: no location", field="artifact_location")
    if location != location.strip() or any(unicodedata.category(c) == "Cc" for c in location):
        raise RagexpInputError(f"{refusal}: a control character or surrounding white space (MLflow drops them before it "
                               "reads the scheme)", field="artifact_location")
    if _LOCAL_LOCATION.match(location):
        return location
    try:
        parsed = parse_canonical(location, ARTIFACT_HTTP_SCHEMES)
    except ValueError as err:
        raise RagexpInputError(f"{refusal}: {err}", field="artifact_location") from None
    try:
        tracking = parse_canonical(tracking_uri, HTTP_SCHEMES)
    except ValueError:
        raise RagexpInputError(f"{refusal}: the tracking store is no HTTP server", field="artifact_location") from None
    if artifact_origin(parsed, tracking) != tracking.origin:
        raise RagexpInputError(refusal, field="artifact_location")
    return parsed.text


def artifact_origin(location: Url, tracking: Url) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` MLflow connects to for the canonical artifact ``location`` under
    the ``tracking`` server. An ``http(s)`` URL is its own origin, its scheme's default port
    filled in. ``mlflow-artifacts:`` is resolved by MLflow (``MlflowArtifactsRepository.resolve_uri``)
    to the tracking server's scheme with the location's host and port, or the tracking server's
    host and port when it names no host: so ``mlflow-artifacts://HOST/x`` goes to port 80 (443
    under an ``https`` server) of HOST, not to the tracking server's port."""
    if location.scheme != "mlflow-artifacts":
        return location.origin
    if not location.host:
        return tracking.origin
    return Url(tracking.scheme, location.host, location.port, location.path).origin


@functools.cache
def code_version() -> str:
    """The git commit of the ragexp checkout (``+dirty`` when it has local changes), else the version.
    Read once per process: the code a process runs is what it imported at its start."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"ragexp-{__version__}"
    return f"{commit}+dirty" if dirty else commit


@functools.cache
def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[f"ragexp.pkg.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def find_finished_run(client: MlflowClient, experiment_id: str, config_hash: str, cost_key: str | None = None) -> str | None:
    """The id of a FINISHED run with this config hash (config + data fingerprints), if any; with
    ``cost_key``, only one that measured its cost the same way (tag :data:`TAG_COST_SETTINGS`)."""
    cost = f" and tags.`{TAG_COST_SETTINGS}` = '{cost_key}'" if cost_key else ""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{TAG_CONFIG_HASH}` = '{config_hash}'{cost} and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def terminal_status(error: BaseException | None) -> str:
    """The status a run closes with: FINISHED, KILLED for interrupts and termination signals,
    FAILED for anything else."""
    if error is None:
        return RunStatus.to_string(RunStatus.FINISHED)
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return RunStatus.to_string(RunStatus.KILLED)
    return RunStatus.to_string(RunStatus.FAILED)


def log_batched(client: MlflowClient, run_id: str, *, params: Mapping[str, str] = {}, metrics: Mapping[str, float] = {},
                tags: Mapping[str, str] = {}) -> None:
    """Write params, metrics and tags in as few ``log_batch`` calls as MLflow's limits allow
    (per call: :data:`BATCH_PARAMS` params, :data:`BATCH_TAGS` tags, :data:`BATCH_TOTAL` entities):
    each call is one store transaction, and a run logs hundreds of values."""
    import time

    now = int(time.time() * 1000)
    pending_params = [Param(k, v) for k, v in params.items()]
    pending_tags = [RunTag(k, str(v)) for k, v in tags.items()]
    pending_metrics = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    while pending_params or pending_tags or pending_metrics:
        batch_params, pending_params = pending_params[:BATCH_PARAMS], pending_params[BATCH_PARAMS:]
        batch_tags, pending_tags = pending_tags[:BATCH_TAGS], pending_tags[BATCH_TAGS:]
        room = BATCH_TOTAL - len(batch_params) - len(batch_tags)
        batch_metrics, pending_metrics = pending_metrics[:room], pending_metrics[room:]
        client.log_batch(run_id, metrics=batch_metrics, params=batch_params, tags=batch_tags)


def run_artifacts(client: MlflowClient, run_id: str) -> ArtifactRepository:
    """Where run ``run_id`` keeps its artifacts, built from the location :func:`check_artifact_location`
    accepted: ``client.log_artifacts(run_id, ...)`` would read the location from the store again."""
    checked = check_artifact_location(client.get_run(run_id).info.artifact_uri, client.tracking_uri, f"run {run_id}")
    return get_artifact_repository(checked, tracking_uri=client.tracking_uri)


def check_experiment_location(client: MlflowClient, experiment_id: str) -> None:
    """The experiment's artifact location passes :func:`check_artifact_location`: MLflow derives the
    location of every new run and trace of the experiment from it."""
    check_artifact_location(client.get_experiment(experiment_id).artifact_location, client.tracking_uri,
                            f"experiment {experiment_id}")


def log_artifact_text(client: MlflowClient, run_id: str, artifact_path: str, text: str) -> None:
    """Add a text file to an existing run's artifacts (kept where :func:`check_artifact_location` allows)."""
    repository = run_artifacts(client, run_id)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / Path(artifact_path).name
        target.write_text(text, encoding="utf-8")
        parent = str(Path(artifact_path).parent)
        repository.log_artifact(str(target), artifact_path=None if parent == "." else parent)


def download_artifact(run_id: str, artifact_path: str, tracking_uri: str | None = None,
                      artifacts_root: str | Path | None = None, dst_dir: Path | None = None) -> Path:
    """Fetch one artifact of a run to ``dst_dir`` (created; default: a new temporary folder).

    A sqlite store records absolute artifact paths, so a store copied or moved with its
    ``mlruns/`` folder points at the old place. When the file is not where the store says, it is
    looked for under the same ``<experiment id>/<run id>/artifacts/`` path below
    ``artifacts_root`` (an explicit ``--artifacts DIR``), then below ``mlruns/`` beside the sqlite
    file; the error names the store and every place looked.
    """
    uri = tracking_uri or default_tracking_uri()
    artifact_uri = MlflowClient(uri).get_run(run_id).info.artifact_uri
    checked = check_artifact_location(artifact_uri, uri, f"run {run_id}")
    dst = Path(dst_dir) if dst_dir is not None else Path(tempfile.mkdtemp(prefix="ragexp-"))
    dst.mkdir(parents=True, exist_ok=True)
    first_error = ""
    if artifacts_root is None:
        try:  # from the location checked, never one MLflow would look up again
            return Path(mlflow.artifacts.download_artifacts(artifact_uri=f"{checked.rstrip('/')}/{artifact_path}",
                                                            dst_path=str(dst), tracking_uri=uri))
        except (MlflowException, OSError) as err:
            first_error = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
    looked = []
    for candidate in relocated_artifact_paths(artifact_uri, run_id, artifact_path, uri, artifacts_root):
        looked.append(str(candidate))
        if candidate.is_file():
            target = dst / candidate.name
            shutil.copyfile(candidate, target)
            return target
    where = f"; also looked in {', '.join(looked)}" if looked else ""
    reason = f" ({first_error})" if first_error else ""
    raise RagexpInputError(
        f"run {run_id!r} in the tracking store {uri} has no artifact {artifact_path!r} at {artifact_uri}{reason}{where}; "
        "if the store was moved, pass --artifacts DIR (the folder holding <experiment id>/<run id>/artifacts)"
    )


def relocated_artifact_paths(artifact_uri: str, run_id: str, artifact_path: str, tracking_uri: str,
                             artifacts_root: str | Path | None = None) -> list[Path]:
    """Where a run's artifact file may be after its store moved (see :func:`download_artifact`):
    the tail ``<experiment id>/<run id>/artifacts`` of a local ``artifact_uri`` re-rooted."""
    parts = Path(artifact_uri.removeprefix("file://")).parts
    if "://" in artifact_uri.removeprefix("file://") or run_id not in parts:
        return []  # a remote artifact store: nothing to re-root
    tail = Path(*parts[parts.index(run_id) - 1:]) / artifact_path
    roots = [Path(artifacts_root)] if artifacts_root is not None else []
    if tracking_uri.startswith("sqlite:///"):
        roots.append(Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlruns")
    return [root / tail for root in dict.fromkeys(roots)]
