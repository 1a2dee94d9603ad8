"""Root 2 of issue #40: one URL policy; the host ragexp checks is the host the client connects to.

The artifact-location check read a URL as ``urllib.parse.urlsplit`` does; urllib3 (under
requests, under MLflow) ends the authority elsewhere: ``http://good.host\\@evil.com/`` passed the
check as ``evil.com``... and the other way round, a store writer's location passed as the
tracking server's host while MLflow sent this machine's credentials and artifacts to another.
Now every URL credentials or data go to is accepted only in one canonical form
(:mod:`ragexp.stored.urls`), and the differential tests below generate spellings and require that
wherever ragexp accepts a URL, urllib3, requests, httpx, MLflow's artifact resolution and
``urllib.parse`` all read the same host and port from the text ragexp hands on.

Fails before (``a39e7ac``): ``ragexp.stored.urls`` did not exist (the differential tests);
through the real checks, the backslash, percent-encoded-dot, upper-case and trailing-dot
artifact locations, tracking URIs and model endpoints were accepted, and the CLI attack sent
this machine's MLflow credentials to the other host.
"""

from __future__ import annotations

import base64
import random
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import requests
import urllib3
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from mlflow.store.artifact.mlflow_artifacts_repo import MlflowArtifactsRepository

from ragexp.errors import RagexpInputError
from ragexp.evaluation.checks import check_base_urls
from ragexp.stored.urls import canonical_url
from ragexp.tracking.store import check_artifact_location, check_tracking_uri
from tests.helpers.bad_input_cases import ENV
from tests.helpers.recording_server import recording_handler

#: Characters that parsers are known to treat differently, mixed into otherwise plain URLs.
TRICKY = ["\\", "@", "#", "?", "%2e", "%2f", "%40", "%5c", ":", ";", "[", "]", ".", "..", "/", "//", " ", "\t", "\n",
          "\x00", "\u3002", "\uff0e", "A", "Z", "0", "0x", "%", "&", "=", "'", "!", "~", "-", "_", "*", "::", "]@"]
HOSTS = ["good.host", "evil.com", "127.0.0.1", "localhost", "[::1]", "10.0.0.1", "a-b.c", "x"]


def client_hosts(url: str) -> dict[str, tuple[str, int | None]]:
    """(host, port) as each HTTP client and parser actually used reads ``url`` (lower-cased hosts;
    IPv6 in brackets); a client that refuses the URL is left out (it sends nothing)."""
    seen: dict[str, tuple[str, int | None]] = {}
    default = {"http": 80, "https": 443}.get(url.split(":", 1)[0])
    try:
        parsed = urllib3.util.parse_url(url)
        seen["urllib3"] = ((parsed.host or "").lower(), parsed.port or default)
    except Exception:  # noqa: BLE001 - a refusal is fine: nothing is sent
        pass
    try:
        prepared = urllib3.util.parse_url(requests.Request("GET", url).prepare().url)
        seen["requests"] = ((prepared.host or "").lower(), prepared.port or default)
    except Exception:  # noqa: BLE001
        pass
    try:
        parsed_x = httpx.URL(url)
        host = parsed_x.host if ":" not in parsed_x.host else f"[{parsed_x.host}]"
        seen["httpx"] = (host.lower(), parsed_x.port or default)
    except Exception:  # noqa: BLE001
        pass
    try:
        split = urlsplit(url)
        host = split.hostname or ""
        seen["urllib.parse"] = (f"[{host}]" if ":" in host else host, split.port or default)
    except Exception:  # noqa: BLE001
        pass
    return seen


def _mutated(draw) -> str:
    """A URL built from plain parts with tricky characters inserted at random places."""
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Http", "ftp", "mlflow-artifacts"]))
    user = draw(st.sampled_from(["", "", "", "evil.com@", "good.host\\@", "a:b@"]))
    host = draw(st.sampled_from(HOSTS))
    port = draw(st.sampled_from(["", "", ":5000", ":80", ":05000", ":65536", ":0", ":5000:6000", ":x"]))
    path = draw(st.sampled_from(["", "/", "/v1", "/api/2.0/mlflow-artifacts/artifacts/1", "/a/b/"]))
    url = f"{scheme}://{user}{host}{port}{path}"
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(url)))
        url = url[:at] + draw(st.sampled_from(TRICKY)) + url[at:]
    return url


urls = st.composite(_mutated)()


def _accepted(url: str, schemes=("http", "https")):
    try:
        return canonical_url(url, field="url", schemes=schemes)
    except RagexpInputError as err:
        assert "\n" not in str(err) and "canonical form" in str(err)
        return None


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(urls)
@example("http://good.host\\@evil.com/")
@example("http://evil.com\\@good.host:5000/x")
@example("http://good.host%2eevil.com/")
@example("http://evil.com\u3002good/")
@example("http://GOOD.host/")
@example("http://good.host./")
@example("http://0x7f.1/")
@example("http://[::1]@good/")
@example("http://evil.com#@good.host/")
@example("http://evil.com;@good.host/")
def test_every_client_reads_the_host_ragexp_accepted(url):
    accepted = _accepted(url)
    if accepted is None:
        return
    note(f"accepted {url!r} as {accepted}")
    assert accepted.text == url  # canonical: ragexp hands on exactly what it checked
    expected = (accepted.host, accepted.origin[2])
    seen = client_hosts(accepted.text)
    assert set(seen) == {"urllib3", "requests", "httpx", "urllib.parse"}, seen  # every client reads it
    assert all(value == expected for value in seen.values()), (url, expected, seen)


def test_the_generated_spellings_reach_both_sides():
    """The property is not vacuous: of a seeded sample of spellings like the generated ones, many
    are accepted and many refused, and the refused ones include spellings the clients disagree on."""
    rng = random.Random(4)
    accepted = refused = disagreeing = 0
    for _ in range(3000):
        url = _sample(rng)
        if _accepted(url) is None:
            refused += 1
            disagreeing += len(set(client_hosts(url).values())) > 1
        else:
            accepted += 1
    assert accepted > 150 and refused > 1000 and disagreeing > 300, (accepted, refused, disagreeing)


def _sample(rng: random.Random) -> str:
    url = f"{rng.choice(['http', 'https', 'HTTP'])}://{rng.choice(['', '', 'evil.com@', 'good.host' + chr(92) + '@'])}" \
          f"{rng.choice(HOSTS)}{rng.choice(['', ':5000', ':05000'])}{rng.choice(['', '/', '/v1'])}"
    for _ in range(rng.randint(0, 2)):
        at = rng.randint(0, len(url))
        url = url[:at] + rng.choice(TRICKY) + url[at:]
    return url


@settings(max_examples=1500, deadline=None)
@given(urls)
@example("mlflow-artifacts://good.host\\@evil.com:5000/1")
@example("mlflow-artifacts:/1")
@example("mlflow-artifacts://[::1]:5000/x")
def test_mlflow_resolves_an_accepted_artifact_uri_to_the_host_ragexp_checked(url):
    """``mlflow-artifacts:`` URIs are turned into HTTP URLs by MLflow itself: the host it resolves
    to (then read by urllib3) is the artifact URI's host, or the tracking server's when it has none."""
    tracking = "http://mlflow.internal:5000"
    accepted = _accepted(url, ("mlflow-artifacts",))
    if accepted is None:
        return
    resolved = urllib3.util.parse_url(MlflowArtifactsRepository.resolve_uri(accepted.text, tracking))
    assert (resolved.host, resolved.port) == ((accepted.host, accepted.port) if accepted.host else ("mlflow.internal", 5000))


# --- the policy at each place a URL is used -------------------------------------------------------------------

NOT_CANONICAL = [
    "http://mlflow:5000\\@evil.com:5000/x", "http://evil.com\\@mlflow:5000/x", "HTTP://mlflow:5000/x", "http://MLFLOW:5000/x",
    "http://mlflow.:5000/x", "http://mlflow%2e:5000/x", "http://user@mlflow:5000/x", "http://mlflow:05000/x",
    "http://mlflow:5000/x?y", "http://mlflow:5000/x#y", "http://mlflow:5000/../x", "http://mlflow:5000/x y",
    "http://ml\u3002flow:5000/x", "http://[::ffff:1.2.3.4]:5000/x", "http://127.1:5000/x", "http://0x7f000001:5000/x",
]


@pytest.mark.parametrize("location", NOT_CANONICAL)
def test_an_artifact_location_not_in_canonical_form_is_refused(location):
    tracking = "http://mlflow:5000" if "ffff" not in location and "127" not in location and "0x7f" not in location else \
        "http://127.0.0.1:5000"
    with pytest.raises(RagexpInputError, match="MLFLOW_TRACKING_"):
        check_artifact_location(location, tracking, "run 'x'")


def test_an_accepted_artifact_location_is_handed_on_as_checked():
    for location in ("/srv/mlruns/1", "file:///srv/mlruns/1", "mlflow-artifacts:/1", "mlflow-artifacts://mlflow:5000/1",
                     "http://mlflow:5000/api/2.0/mlflow-artifacts/artifacts/1"):
        assert check_artifact_location(location, "http://mlflow:5000", "run 'x'") == location


@pytest.mark.parametrize("url", NOT_CANONICAL)
def test_a_tracking_uri_or_model_endpoint_not_in_canonical_form_is_refused(url):
    with pytest.raises(RagexpInputError) as caught:
        check_tracking_uri(url)
    assert caught.value.field == "tracking.uri"
    with pytest.raises(RagexpInputError) as caught:
        check_base_urls({"generator": {"model": {"base_url": url}}})
    assert caught.value.field == "generator.model.base_url"


def test_the_refusal_shows_the_canonical_spelling_where_there_is_one():
    with pytest.raises(RagexpInputError, match=r"write http://mlflow:5000/x$"):
        canonical_url("HTTP://MLflow:5000/x", field="tracking.uri")


_Recorder = recording_handler()


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """A real MLflow tracking server (it receives credentials) and an attacker's server beside it."""
    from tests.helpers.mlflow_server import mlflow_server, wait_until_healthy

    root = tmp_path_factory.mktemp("server")
    log = root / "mlflow-server.log"
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        with mlflow_server(root, ["--backend-store-uri", f"sqlite:///{root / 'm.db'}"], log, env=ENV) as (server, base):
            wait_until_healthy(server, base, log)
            yield base, f"127.0.0.1:{attacker.server_address[1]}", f"sqlite:///{root / 'm.db'}"
    finally:
        attacker.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["http://{evil}\\@{good}/artifacts", "http://{evil}%2e@{good}/artifacts",
                                      "HTTP://{evil}\\@{good}/artifacts", "mlflow-artifacts://{evil}\\@{good}/artifacts"])
def test_reproduce_sends_no_credentials_to_a_location_spelled_to_fool_the_check(tmp_path, tracking_server, spelling):
    """Through the real CLI against a real tracking server: a store writer's artifact location
    spelled so that ``urllib.parse`` reads the tracking server's host and urllib3 the attacker's.
    Before, this machine's MLflow credentials went to the attacker; now nothing reaches it."""
    from mlflow.tracking import MlflowClient

    base, evil, database = tracking_server
    _Recorder.seen = []
    writer = MlflowClient(database)  # the store writer edits the server's database itself
    location = spelling.format(evil=evil, good=base.removeprefix("http://"))
    experiment = writer.create_experiment(f"shared-{len(writer.search_experiments())}", artifact_location=location)
    run_id = writer.create_run(experiment).info.run_id
    env = {**ENV, "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "s3cret-pw"}
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", "reproduce", run_id, "--tracking-uri", base],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env, check=False)
    time.sleep(0.3)
    assert _Recorder.seen == [], _Recorder.seen  # not one request, so no Authorization header either
    assert proc.returncode == 2 and "field 'artifact_location'" in proc.stderr, proc.stderr[-2000:]
    assert not (Path(tmp_path) / "outputs").exists()
