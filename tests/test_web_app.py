"""The shared web layer: loopback only, busy port refused at once, whole-file writes, the edit lock
shared by processes, 409 on a conflict."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from ragexp.errors import RagexpInputError
from ragexp.web.app import create_app, reserve_port, url_of
from ragexp.web.edit_session import Conflict, EditLock, atomic_write, lock_path


def test_reserve_port_binds_loopback_and_a_taken_port_names_itself():
    sock = reserve_port(0)
    try:
        host, port = sock.getsockname()
        assert host == "127.0.0.1" and url_of(sock) == f"http://127.0.0.1:{port}/"
        with pytest.raises(RagexpInputError, match=f"port {port} on 127.0.0.1 is already in use") as err:
            reserve_port(port)
        assert err.value.field == "--port"
    finally:
        sock.close()
    with pytest.raises(RagexpInputError, match="not a TCP port"):
        reserve_port(70000)


def test_atomic_write_replaces_whole_and_leaves_no_partial_file(tmp_path):
    path = tmp_path / "x.json"
    atomic_write(path, "one")
    atomic_write(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def another_process_finds_the_lock(path) -> str:
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], capture_output=True, text=True, check=True).stdout.strip()


def test_edit_lock_is_held_against_other_processes_and_reentrant_in_a_thread(tmp_path):
    lock = EditLock(tmp_path / "labels.csv")
    assert lock.path == lock_path(tmp_path / "labels.csv") == tmp_path / "labels.csv.lock"
    with lock:
        assert another_process_finds_the_lock(lock.path) == "held"
        with lock:  # nested (a method calling another under the lock): no deadlock, still held after
            pass
        assert another_process_finds_the_lock(lock.path) == "held"
    assert another_process_finds_the_lock(lock.path) == "free"
    with pytest.raises(ZeroDivisionError):
        with lock:
            1 / 0
    assert another_process_finds_the_lock(lock.path) == "free"  # released on an error too


def test_app_serves_home_static_files_and_routers_with_409(tmp_path):
    router = APIRouter()

    @router.put("/api/data")
    def put(body: dict):
        raise Conflict(tmp_path / "data.txt", f"{body['field']} changed elsewhere").http()

    home = tmp_path / "page.html"
    home.write_text("<h1>hello</h1>")
    client = TestClient(create_app([router], home), base_url=LOCAL)
    assert "hello" in client.get("/").text
    for name in ("common.css", "saving.js", "keys.js"):
        assert client.get(f"/static/{name}").status_code == 200
    refused = client.put("/api/data", json={"field": "gold_answer"})
    assert refused.status_code == 409 and refused.json()["detail"] == {"message": "gold_answer changed elsewhere"}


LOCAL = "http://127.0.0.1"


def local_app(tmp_path) -> TestClient:
    router = APIRouter()

    @router.post("/api/data")
    def post(body: dict):
        return {"got": body}

    return create_app([router], "annotate.html")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:5050", "127.0.0.1.evil.example", "127.0.0.1@evil.example",
                                  "10.0.0.5:5050", ""])
def test_a_host_that_is_not_this_machine_is_refused(tmp_path, host):
    """DNS rebinding: another site's name resolving to 127.0.0.1 must not reach the page or its API."""
    client = TestClient(local_app(tmp_path), base_url=LOCAL)
    for method, path in (("get", "/"), ("get", "/health"), ("post", "/api/data")):
        refused = client.request(method, path, headers={"Host": host}, json={"x": 1})
        assert refused.status_code == 400 and "is not this machine" in refused.json()["detail"]


@pytest.mark.parametrize("host", ["127.0.0.1:5050", "localhost:5050", "[::1]:5050", "127.0.0.1", "LOCALHOST:5050"])
def test_loopback_hosts_reach_the_page(tmp_path, host):
    client = TestClient(local_app(tmp_path), base_url=LOCAL)
    assert client.get("/health", headers={"Host": host}).json() == {"ok": True}
    posted = client.post("/api/data", headers={"Host": host, "Origin": f"http://{host}"}, json={"x": 1})
    assert posted.json() == {"got": {"x": 1}}


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:8000", "http://localhost:5050", "null",
                                    "https://127.0.0.1:5050"])
def test_a_write_from_another_origin_is_refused_and_reads_are_not(tmp_path, origin):
    """CSRF: a page on another site or another local port must not change the files."""
    client = TestClient(local_app(tmp_path), base_url=LOCAL)
    refused = client.post("/api/data", headers={"Host": "127.0.0.1:5050", "Origin": origin}, json={"x": 1})
    assert refused.status_code == 403 and origin in refused.json()["detail"]
    assert client.get("/health", headers={"Host": "127.0.0.1:5050", "Origin": origin}).status_code == 200
    # a script without a browser sends no Origin: allowed
    assert client.post("/api/data", headers={"Host": "127.0.0.1:5050"}, json={"x": 1}).status_code == 200
