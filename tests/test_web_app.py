"""The shared web layer: loopback only, busy port refused at once, saves guarded by an etag."""

from __future__ import annotations

import socket

import pytest
from fastapi import APIRouter, Header
from fastapi.testclient import TestClient

from ragexp.errors import RagexpInputError
from ragexp.web.app import create_app, reserve_port, url_of
from ragexp.web.files import ABSENT, Conflict, GuardedFile, etag_of


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


def test_guarded_file_refuses_a_stale_etag_and_writes_whole(tmp_path):
    path = tmp_path / "x.json"
    guarded = GuardedFile(path)
    assert guarded.etag() == ABSENT
    first = guarded.replace(ABSENT, "one")
    assert first == etag_of(path) != ABSENT and path.read_text() == "one"
    second = guarded.replace(first, "two")
    with pytest.raises(Conflict) as err:  # a second page still holding the first etag
        guarded.replace(first, "lost")
    assert err.value.current == second and path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no partial file left


def test_app_serves_home_static_files_and_routers_with_409(tmp_path):
    guarded = GuardedFile(tmp_path / "data.txt")
    router = APIRouter()

    @router.put("/api/data")
    def put(body: dict, if_match: str | None = Header(default=None)):
        try:
            return {"etag": guarded.replace(if_match, body["text"])}
        except Conflict as conflict:
            raise conflict.http() from None

    home = tmp_path / "page.html"
    home.write_text("<h1>hello</h1>")
    client = TestClient(create_app([router], home))
    assert "hello" in client.get("/").text
    for name in ("common.css", "saving.js", "keys.js"):
        assert client.get(f"/static/{name}").status_code == 200
    etag = client.put("/api/data", json={"text": "a"}, headers={"If-Match": ABSENT}).json()["etag"]
    stale = client.put("/api/data", json={"text": "b"}, headers={"If-Match": ABSENT})
    assert stale.status_code == 409 and stale.json()["detail"]["etag"] == etag
    assert (tmp_path / "data.txt").read_text() == "a"
