"""Issue #52 (red team, round 6): stored or handed data that sent this machine's secrets or the eval
questions elsewhere, each root tested over its family of variants.

1. An artifact location that does not start with its scheme (white space, a control character)
   was a local path to the location check, while ``urllib.parse`` under MLflow drops it and reads
   ``http://``: MLflow uploaded there with this machine's MLflow credentials. Every reader of a
   stored location (run, upload, reproduce, traces, gate, compare --per-query, judge review,
   evalset annotate --from-run) refuses it now.
2. A ``system`` block without ``secret_env`` skipped the endpoint allow-list (with it null, the
   config was refused): every optional field of every endpoint block, absent, null or set.
3. ``mlflow-artifacts://HOST/...`` without a port was checked as if it had the tracking server's
   port; MLflow connects to the tracking scheme's default port of HOST.
Low: an IPv6 zone id was accepted in a URL; Markdown images and HTML elements in untrusted text
written into MLflow (traces, the experiment description) loaded from other hosts when opened.

Fails before (main at ``bd8562d``, this file run there: 28 of its first 37 tests failed): root 1,
97 of the family's 108 locations were accepted (either tracking store); ``ragexp run`` and
``ragexp upload`` PUT ``ragexp_results.json`` to the attacker with ``Authorization: Basic`` of this
machine's credentials; reproduce, traces, gate and annotate ended in a traceback, compare said the
run had no results (the in-process reader test stops at a function main lacks). Root 2: of 66
absent/null/set variants, ``system.secret_env`` absent was let through, and the handed config's
questions were POSTed to the endpoint. Root 3: ``mlflow-artifacts://mlflow/1`` was accepted under
tracking servers ``http://mlflow:5000``, ``http://mlflow:443``, ``https://mlflow:8443`` and
``https://mlflow:80``, where MLflow connects to the scheme's default port instead. Zone ids: all 5
accepted. The Markdown tests import a function main lacks.
"""

from __future__ import annotations

import inspect
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import urllib3
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository
from mlflow.tracking import MlflowClient
from mlflow.utils.uri import append_to_uri_path

from ragexp.errors import RagexpInputError
from ragexp.tracking import store
from tests.helpers.bad_input_cases import ENV
from tests.helpers.recording_server import recording_handler
from tests.helpers.tiny_dataset import write_tiny_dataset

CREDENTIALS = {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "s3cret-pw", "MLFLOW_TRACKING_TOKEN": ""}


_Recorder = recording_handler()


@pytest.fixture(scope="module")
def attacker():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture()
def seen(attacker):
    _Recorder.seen = []
    yield _Recorder.seen


# --- root 1: the location check and the client read the same text ------------------------------------------

#: What may stand before ``http://``: every C0 control and space, DEL, every C1 control, Unicode
#: white space and invisible characters, and prefixes a path check might take for a relative path.
PREFIXES = ([chr(c) for c in range(0x00, 0x21)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
            + ["\u00a0", "\u1680", "\u2000", "\u2007", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f",
               "\u3000", "\ufeff", "./", "x/", "mlruns/", "\\", "//", "\t\n ", "file:"])


def hostile_locations(url: str) -> list[str]:
    """The family of ``url``'s spellings that are not its canonical form: a prefix, a tab, newline
    or carriage return inside the scheme or after its colon (``urllib.parse`` removes them), and
    white space or a control character after it."""
    inside = [url[:i] + c + url[i:] for i in (1, 2, 3, 4, 5, 6) for c in "\t\n\r"]
    return [p + url for p in PREFIXES] + inside + [url + s for s in (" ", "\t", "\n", "\x00", "\x85")]


def mlflow_destination(location: str, tracking: str, *, as_run: bool = False) -> tuple[str, str, int | None] | str:
    """Where MLflow itself sends artifacts for ``location``: ``"local"``, ``"refused"``, or the
    (scheme, host, port) its HTTP client connects to. An experiment's location (the default) is
    where a new run's artifacts go (MLflow joins ``<run id>/artifacts`` to it, re-spelling the URL);
    a run's (``as_run``) is used as it is, its URL prepared by requests (under MLflow's client)."""
    uri = location if as_run else append_to_uri_path(location, "0123abcd", "artifacts")
    try:
        repository = get_artifact_repository(uri, tracking_uri=tracking)
        if isinstance(repository, LocalArtifactRepository):
            return "local"
        parsed = urllib3.util.parse_url(requests.Request("GET", repository.artifact_uri).prepare().url)
    except Exception:  # noqa: BLE001 - MLflow or its HTTP client refuses it: nothing is sent
        return "refused"
    return parsed.scheme, (parsed.host or "").lower(), parsed.port or {"http": 80, "https": 443}[parsed.scheme]


def _accepted(location: str, tracking: str) -> bool:
    try:
        store.check_artifact_location(location, tracking, "run 'x'")
    except RagexpInputError as err:
        assert err.field == "artifact_location" and "\n" not in str(err), str(err)
        return False
    return True


@pytest.mark.parametrize("tracking", ["sqlite:///m.db", "http://127.0.0.1:5000"])
def test_every_spelling_before_the_scheme_is_refused_and_mlflow_reads_most_of_them_as_http(tracking):
    """The truth is MLflow's own artifact repository: every location ragexp accepts is one MLflow
    keeps on this machine or sends to the tracking server, and the family is a real attack (MLflow
    sends most of it to the attacker's host)."""
    evil = "http://127.0.0.1:9/x"
    family = hostile_locations(evil)
    accepted = [location for location in family if _accepted(location, tracking)]
    assert accepted == [], [ascii(location) for location in accepted]
    to_attacker = [loc for loc in family if ("http", "127.0.0.1", 9) in
                   (mlflow_destination(loc, tracking), mlflow_destination(loc, tracking, as_run=True))]
    assert len(to_attacker) >= 50, len(to_attacker)  # the 33 C0 + space prefixes, tabs and newlines inside...


@pytest.mark.parametrize("location", ["/srv/mlruns/1/abc/artifacts", "file:///srv/mlruns/1", "file:/srv/mlruns/1",
                                      "/home/a b/ünï/mlruns/1", "mlflow-artifacts:/1/abc/artifacts",
                                      "http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1"])
def test_what_is_accepted_is_handed_on_unchanged_and_stays_here_or_on_the_server(location):
    tracking = "http://127.0.0.1:5000"
    assert store.check_artifact_location(location, tracking, "run 'x'") == location
    assert mlflow_destination(location, tracking) in ("local", ("http", "127.0.0.1", 5000))


@pytest.mark.parametrize("location", ["//evil.host/share/mlruns", "file://evil.host/mlruns", "mlruns/1", "", None,
                                      "file:////evil.host/share"])
def test_a_network_path_a_relative_path_or_no_location_is_refused(location):
    """MLflow stores absolute paths itself; ``//host/...`` is a network share on some systems."""
    assert not _accepted(location, "sqlite:///m.db")


def _plant(database: Path, experiment_id: str, location: str, run_uri: str) -> None:
    """What a store writer does: set the artifact location of the experiment and of each of its runs
    (``{run}`` in ``run_uri``: the run's id) in the database."""
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (location, experiment_id))
        connection.execute("UPDATE runs SET artifact_uri = replace(?, '{run}', run_uuid) WHERE experiment_id = ?",
                           (run_uri, experiment_id))


def _readers(client: MlflowClient, experiment: str, experiment_id: str, run_id: str) -> dict:
    """The store functions every command that reads or writes a stored location goes through."""
    from ragexp.tracking.traces import log_run_traces

    return {
        "ensure_experiment (run, upload, evalset agreement)": lambda: store.ensure_experiment(client, experiment),
        "check_experiment_location (reproduce)": lambda: store.check_experiment_location(client, experiment_id),
        "download_artifact (reproduce, traces, gate, compare, annotate --from-run)":
            lambda: store.download_artifact(run_id, store.CONFIG_ARTIFACT, client.tracking_uri),
        "log_artifact_text (judge review, judge ppi)": lambda: store.log_artifact_text(client, run_id, "a.txt", "x"),
        "run_artifacts (run logging, compare --per-query)": lambda: store.run_artifacts(client, run_id),
        "log_run_traces (run, traces)": lambda: log_run_traces(client, experiment_id, run_id, None, None, None,
                                                               reranked=False),
    }


def test_every_reader_refuses_every_planted_spelling(tmp_path, attacker, seen, monkeypatch):
    """In a real sqlite store, for each spelling of the family planted as both the experiment's and
    the run's location: each reader refuses, and the attacker receives nothing."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    database = tmp_path / "shared.db"
    client = MlflowClient(f"sqlite:///{database}")
    experiment_id = client.create_experiment("shared")
    run_id = client.create_run(experiment_id).info.run_id
    let_through = []
    for location in hostile_locations(f"{attacker}/artifacts"):
        if "\x00" in location:
            continue  # sqlite keeps text up to a NUL; the function-level test covers it
        _plant(database, experiment_id, location, location)
        for name, reader in _readers(client, "shared", experiment_id, run_id).items():
            try:
                reader()
                let_through.append((name, ascii(location)))
            except RagexpInputError as err:
                assert err.field == "artifact_location", (name, ascii(location), str(err))
    time.sleep(0.2)
    assert let_through == [] and seen == [], (let_through[:10], len(let_through), seen[:3])


# --- root 1 through the commands -----------------------------------------------------------------------------


def ragexp(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragexp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env={**ENV, **CREDENTIALS})


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A real run of the tiny data set, logged to a sqlite store (the store the attacker edits), and
    an empty second run beside it."""
    root = tmp_path_factory.mktemp("logged")
    write_tiny_dataset(root)
    database = root / "m.db"
    proc = ragexp(root, "run", "dataset=evalset", "dataset.corpus=corpus", "dataset.evalset=evalset.jsonl",
                  "retrieval=bm25", "chunking=none", f"tracking.uri=sqlite:///{database}", "tracking.experiment=shared",
                  "tracking.traces=none", "hydra.run.dir=outputs/run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{database}")
    experiment = client.get_experiment_by_name("shared")
    run_id = client.search_runs([experiment.experiment_id])[0].info.run_id
    other_id = client.create_run(experiment.experiment_id).info.run_id  # a second run to compare with
    return root, database, experiment.experiment_id, run_id, other_id


COMMANDS = {
    "run": ["run", "dataset=evalset", "dataset.corpus=corpus", "dataset.evalset=evalset.jsonl", "retrieval=bm25",
            "chunking=none", "tracking.uri={uri}", "tracking.experiment=shared", "resume=false"],
    "upload": ["upload", "outputs/run", "--tracking-uri", "{uri}"],
    "reproduce": ["reproduce", "{run}", "--tracking-uri", "{uri}"],
    "traces": ["traces", "{run}", "--tracking-uri", "{uri}"],
    "gate": ["gate", "--baseline", "{run}", "--candidate", "{run}", "--tracking-uri", "{uri}"],
    "compare --per-query": ["compare", "{run}", "{other}", "--per-query", "--force", "--tracking-uri", "{uri}"],
    "evalset annotate --from-run": ["evalset", "annotate", "new.jsonl", "--corpus", "corpus", "--from-run", "{run}",
                                    "--queue-only", "--tracking-uri", "{uri}"],
}


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_no_command_sends_anything_to_a_location_spelled_with_a_leading_control_character(
        tmp_path, logged_run, attacker, seen, command):
    """The store's locations are planted as ``\\x01http://attacker/...`` (experiment) and
    `` http://attacker/...`` (run); before, ``ragexp run`` exited 0 having uploaded the results,
    the config and the per-query table there with this machine's MLflow credentials."""
    root, database, experiment_id, run_id, other_id = logged_run
    work = tmp_path / "work"
    shutil.copytree(root, work, ignore=shutil.ignore_patterns("m.db", "m.db.lock"))
    shutil.copyfile(database, work / "m.db")
    _plant(work / "m.db", experiment_id, f"\x01{attacker}/store", f" {attacker}/store/{{run}}/artifacts")
    args = [arg.format(uri=f"sqlite:///{work / 'm.db'}", run=run_id, other=other_id) for arg in COMMANDS[command]]
    proc = ragexp(work, *args)
    time.sleep(0.2)
    assert seen == [], seen[:3]  # not one request, so no credentials either
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO mlflow." not in line
             and " WARNING " not in line]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "field 'artifact_location'" in lines[-1] and "MLFLOW_TRACKING_" in lines[-1], lines


# --- root 2: an endpoint block is checked whatever optional fields it has --------------------------------


def _endpoint_blocks(url: str) -> dict[str, dict]:
    """Every block of a config that names an endpoint, with every optional field set as this
    machine's conf/ sets it (the block a field is dropped from or nulled below)."""
    import yaml

    from ragexp.config.compose import CONFIG_DIR

    system = yaml.safe_load((CONFIG_DIR / "system" / "http.yaml").read_text(encoding="utf-8"))
    generator = yaml.safe_load((CONFIG_DIR / "generator" / "openai.yaml").read_text(encoding="utf-8"))
    judge = yaml.safe_load((CONFIG_DIR / "judge" / "openai.yaml").read_text(encoding="utf-8"))
    system.update(url=url, secret_env="TEAM_TOKEN")
    generator["model"]["base_url"] = judge["chat_model"]["base_url"] = url
    return {"system": system, "generator.model": generator, "judge.chat_model": judge}


def _variants(config: dict, path: str, url_key: str):
    """(label, config) with each optional key of the block at ``path`` absent, null and set."""
    import copy

    block = config
    for part in path.split("."):
        block = block[part]
    for key in [k for k in block if k not in (url_key, "name", "_target_")]:
        for how in ("absent", "null", "set"):
            variant = copy.deepcopy(config)
            node = variant
            for part in path.split("."):
                node = node[part]
            if how == "absent":
                del node[key]
            elif how == "null":
                node[key] = None
            yield f"{path}.{key} {how}", variant


def test_no_optional_field_absent_null_or_set_lets_an_endpoint_past_the_allow_list(monkeypatch):
    from ragexp.config.endpoints import check_endpoints

    monkeypatch.delenv("RAGEXP_ALLOWED_ENDPOINTS", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url = "http://10.9.8.7:8080/search"
    blocks = _endpoint_blocks(url)
    let_through, checked = [], 0
    for top, block in blocks.items():
        config = {top.split(".")[0]: block}
        url_key = "url" if top == "system" else "base_url"
        for label, variant in _variants(config, top, url_key):
            checked += 1
            try:
                check_endpoints(variant)
                let_through.append(label)
            except RagexpInputError as err:
                assert err.field == f"{top}.{url_key}" and url in str(err), (label, err.field, str(err))
    assert checked > 60 and let_through == [], let_through


def test_the_declaration_names_every_url_parameter_and_the_clients_default_key():
    """The endpoint declaration is complete: every URL parameter of a shipped component class and
    of a black-box system is declared, with the key variable the client reads when none is set."""
    from hydra.utils import get_object

    from ragexp.config.endpoints import ENDPOINT_FIELDS
    from ragexp.config.targets import SHIPPED
    from ragexp.llm.openai_compat import OpenAIChatModel
    from ragexp.systems.build import KEYS
    from ragexp.systems.http_system import HttpSystem

    declared = {field.url: field for field in ENDPOINT_FIELDS}
    url_names = {name for target in SHIPPED for name in inspect.signature(get_object(target).__init__).parameters
                 if "url" in name.lower() or "endpoint" in name.lower() or "host" in name.lower()}
    url_names |= {key for keys in KEYS.values() for key in keys if "url" in key or "endpoint" in key or "host" in key}
    assert url_names == set(declared), url_names
    for cls, url_key in ((OpenAIChatModel, "base_url"), (HttpSystem, "url")):
        parameters = inspect.signature(cls.__init__).parameters
        field = declared[url_key]
        assert parameters[field.key_env].default == field.default_key_env, cls


def _config_without_secret_env(url: str, corpus: Path, evalset: Path) -> str:
    """A whole config whose system block is conf/system/http.yaml's with ``secret_env`` left out."""
    import yaml

    system = _endpoint_blocks(url)["system"]
    del system["secret_env"]
    return yaml.safe_dump({"dataset": {"_target_": "ragexp.data.dataset.EvalsetDataset", "name": "evalset",
                                       "corpus": str(corpus), "evalset": str(evalset)},
                           "system": system,
                           "retrieval": {"_target_": "reference_pipelines.bm25.BM25Retriever", "name": "bm25"}})


def test_a_handed_system_block_without_secret_env_sends_no_question(tmp_path, attacker, seen):
    """Before: ``ragexp run --config-path`` with ``system.url`` set and ``secret_env`` absent sent
    every eval question to the endpoint nobody allowed."""
    corpus, evalset = write_tiny_dataset(tmp_path)
    folder = tmp_path / "handed"
    folder.mkdir()
    (folder / "resolved.yaml").write_text(_config_without_secret_env(f"{attacker}/search", tmp_path / corpus,
                                                                     tmp_path / evalset), encoding="utf-8")
    env = {key: value for key, value in ENV.items() if key != "RAGEXP_ALLOWED_ENDPOINTS"}
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "run", "--config-path", str(folder), "--config-name",
                           "resolved", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False, env=env)
    time.sleep(0.2)
    assert seen == [], seen[:3]
    assert proc.returncode == 2 and "field 'system.url'" in proc.stderr and "allow" in proc.stderr, proc.stderr[-3000:]


def test_reproduce_live_of_an_edited_stored_config_checks_the_system_endpoint(tmp_path, monkeypatch):
    """The stored config ``reproduce --live`` reads, edited to drop ``secret_env``: the same gate."""
    from ragexp.evaluation.saved_config import read_run_config

    monkeypatch.delenv("RAGEXP_ALLOWED_ENDPOINTS", raising=False)
    corpus, evalset = write_tiny_dataset(tmp_path)
    saved = tmp_path / "resolved.yaml"
    saved.write_text(_config_without_secret_env("http://10.9.8.7:8080/search", tmp_path / corpus, tmp_path / evalset),
                     encoding="utf-8")
    with pytest.raises(RagexpInputError) as refused:
        read_run_config(saved, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", cache_dir=str(tmp_path / "cache"))
    assert refused.value.field == "system.url" and "http://10.9.8.7:8080/search" in str(refused.value)


# --- root 3: each scheme's default port is the one the client uses ----------------------------------------

TRACKING_URIS = ["http://mlflow:5000", "http://mlflow", "http://mlflow:443", "https://mlflow", "https://mlflow:8443",
                 "https://mlflow:80"]
LOCATIONS = ["mlflow-artifacts://mlflow/1", "mlflow-artifacts://mlflow:5000/1", "mlflow-artifacts://mlflow:80/1",
             "mlflow-artifacts://mlflow:443/1", "mlflow-artifacts://mlflow:8443/1", "mlflow-artifacts:/1",
             "http://mlflow/1", "http://mlflow:80/1", "http://mlflow:5000/1", "http://mlflow:443/1", "https://mlflow/1",
             "https://mlflow:443/1", "https://mlflow:8443/1", "https://mlflow:80/1", "mlflow-artifacts://other/1"]


@pytest.mark.parametrize("tracking", TRACKING_URIS)
def test_a_location_is_accepted_exactly_when_mlflow_connects_to_the_tracking_server(tracking):
    """The truth: the (scheme, host, port) MLflow's repository for the location connects to, and
    the one it connects to for the tracking server itself."""
    server = mlflow_destination(f"{tracking}/api/2.0/mlflow-artifacts/artifacts", tracking)
    wrong = [(location, mlflow_destination(location, tracking)) for location in LOCATIONS
             if _accepted(location, tracking) != (mlflow_destination(location, tracking) == server)]
    assert wrong == [], wrong


# --- low: IPv6 zone ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["[fe80::1%25eth0]", "[fe80::1%eth0]", "[fe80::1%1]", "[fe80::1%25]", "[::1%lo]"])
def test_an_ipv6_zone_id_is_refused(host):
    from ragexp.stored.urls import canonical_url

    for url in (f"http://{host}:8080/v1", f"https://{host}/v1"):
        with pytest.raises(RagexpInputError, match="zone id|IPv6"):
            canonical_url(url, field="base_url")


# --- low: untrusted text written into MLflow loads nothing when opened --------------------------------------

REMOTE_CONTENT = ["see ![x](http://evil/p.png) now", "![a][r]\n\n[r]: http://evil/x", "\\![x](http://evil/p)",
                  "\\\\![x](http://evil/p)", "<IMG src=http://evil/p>", "x <video poster=http://evil/p>",
                  "<svg><image href=http://evil/p /></svg>", "\\<img src=http://evil/p>",
                  "<picture><source srcset=http://evil/p>",
                  "< img src=http://evil/p>", "<iframe src=http://evil/p>", "<link rel=stylesheet href=http://evil/s>"]


@pytest.mark.parametrize("text", REMOTE_CONTENT)
def test_text_from_untrusted_data_renders_without_remote_content(text):
    """Rendered as CommonMark with HTML on (what MLflow's Markdown views do at most), the inert text
    has no element that fetches a URL; plain text is unchanged."""
    from markdown_it import MarkdownIt

    from ragexp.tracking.trace_content import inert, inert_markdown

    rendered = MarkdownIt("commonmark", {"html": True}).render(inert_markdown(text)).lower()
    for tag in ("<img", "<video", "<svg", "<image", "<picture", "<source", "<iframe", "<link"):
        assert tag not in rendered, (text, rendered)
    assert inert({"a": [text, 3]}) == {"a": [inert_markdown(text), 3]}
    plain = "a<b, List<String>, 2 ! [x] and [link](http://h/)"
    assert inert_markdown(plain) == plain


def test_the_experiment_description_shows_an_eval_set_name_inert():
    from ragexp.datamodel import Corpus, EvalSet
    from ragexp.tracking.experiments import describe

    description = describe(Corpus([]), EvalSet(items=[], name="![x](http://evil/p.png)"), "1")
    assert "![" not in description and "&#33;[x](http://evil/p.png)" in description


#: MlflowClient/mlflow methods that write a run's artifacts by reading its location from the store
#: again (between ragexp's check and the write, a planted location would be used unchecked).
_UNCHECKED_WRITES = ("log_artifact", "log_artifacts", "log_table", "log_dict", "log_text", "log_image",
                     "log_figure")


def test_every_artifact_write_goes_through_the_checked_location():
    """Only ragexp.tracking.store touches an artifact repository; every other module writes through
    store.run_artifacts / store.log_artifact_text (the checked string handed to MLflow), never
    through a client method that looks the location up again. Found on the merged branch:
    sweep_summary's two log_artifacts calls and run_logger's log_table."""
    import ast

    root = Path(store.__file__).resolve().parents[1]
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path == Path(store.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _UNCHECKED_WRITES):
                receiver = ast.unparse(node.func.value)
                if not receiver.startswith("store.run_artifacts(") and receiver != "repository":
                    offenders.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node.func)}")
    assert offenders == []
