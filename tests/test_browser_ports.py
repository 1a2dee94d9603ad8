"""Ports browsers refuse are refused by every command with ``--port``, in one line, before anything starts.

- The list (:mod:`ragexp.web.browser_ports`) against Debian's Chromium itself: every port 1-10,999
  is fetched from a page (a no-cors fetch to 127.0.0.1 per port); the ports Chromium fails with
  ``ERR_UNSAFE_PORT`` are exactly the listed ones in that range (above it the list holds none:
  checked once over all 65,535 ports, see the module docstring).
- ``evalset annotate``, ``judge review`` and ``ui`` with a refused port: exit 2, one line naming it
  and an open port to use instead, and nothing bound or written.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragexp.errors import RagexpInputError
from ragexp.web.browser_ports import BLOCKED, BLOCKED_BY_NEWER, check_browser_port, next_open_port
from tests.helpers.chromium import BROWSER_MARKS, CHROMIUM, launched
from tests.helpers.cli import ENV

SCANNED = range(1, 11_000)

_FETCH_ALL = """async ([lo, hi]) => {
    for (let start = lo; start < hi; start += 500) {
        const batch = [];
        for (let port = start; port < Math.min(hi, start + 500); port++)
            batch.push(fetch(`http://127.0.0.1:${port}/`, {mode: "no-cors"}).catch(() => null));
        await Promise.all(batch);
    }
}"""


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=BROWSER_MARKS[2].kwargs["reason"])
def test_the_list_is_what_chromium_refuses():
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")
    from urllib.parse import urlsplit

    failures: dict[int, str] = {}
    with launched() as browser:
        page = browser.new_page()
        page.goto("about:blank")
        page.on("requestfailed", lambda request: failures.__setitem__(urlsplit(request.url).port or 80, request.failure))
        page.evaluate(_FETCH_ALL, [SCANNED.start, SCANNED.stop])
    refused = {port for port, why in failures.items() if why == "net::ERR_UNSAFE_PORT"}
    assert len(failures) > 0.99 * len(SCANNED)  # nearly every fetch failed (nothing listens there), so each was seen
    assert refused == {port for port in BLOCKED if port in SCANNED}


def test_refused_ports_name_an_open_one():
    for port in (5060, 5061, 6000, 6665, 10080, 4190):
        with pytest.raises(RagexpInputError) as err:
            check_browser_port(port)
        assert f"browsers refuse to open port {port}" in err.value.message
    assert next_open_port(6664) == 6670 and next_open_port(5059) == 5062  # 6665-6669 and 5060-5061 skipped
    check_browser_port(5000)  # the defaults pass
    check_browser_port(5050)
    assert not BLOCKED & BLOCKED_BY_NEWER


@pytest.mark.parametrize("command", [
    ["evalset", "annotate", "never-written.jsonl", "--corpus", "no-such-corpus"],
    ["judge", "review", "0123456789abcdef0123456789abcdef"],
    ["ui"],
])
def test_every_command_with_a_port_refuses_one_browsers_block(tmp_path, command):
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli", *command, "--port", "5061"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "field '--port': browsers refuse to open port 5061" in lines[0] and "--port 5062" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started
