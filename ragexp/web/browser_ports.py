"""Ports a browser refuses to open: a page server on one of them prints a URL nobody can visit.

Chromium (and Firefox, with a similar list) refuses ``http://host:PORT/`` with
``ERR_UNSAFE_PORT`` for the ports of other protocols (SMTP, SIP, X11, IRC, ...), so that a web page
cannot talk to those services. :data:`BLOCKED` is Chromium's restricted-port list: the 80 ports
Debian's Chromium on the build machine refused when every port 1-65535 was tried
(``tests/test_browser_ports.py`` checks the list against it), plus 4190 (ManageSieve) and 6679
(IRC over TLS), which newer Chromium releases added. :func:`check_browser_port` refuses them in one
line, before a command binds anything; every command with ``--port`` calls it (``evalset
annotate`` and ``judge review`` through :func:`ragexp.web.app.reserve_port`, ``ui`` itself).
"""

from __future__ import annotations

from ragexp.errors import RagexpInputError

BLOCKED = frozenset({
    1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
    111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
    540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 5060, 5061, 6000,
    6566, 6665, 6666, 6667, 6668, 6669, 6697, 10080,
})  # fmt: skip
#: Restricted by newer Chromium releases than the one the list above was read from.
BLOCKED_BY_NEWER = frozenset({4190, 6679})


def next_open_port(port: int) -> int:
    """The first port above ``port`` that browsers open."""
    port += 1
    while port in BLOCKED or port in BLOCKED_BY_NEWER:
        port += 1
    return port


def check_browser_port(port: int) -> None:
    """:class:`RagexpInputError` (field ``--port``) when browsers refuse ``port``."""
    if port in BLOCKED or port in BLOCKED_BY_NEWER:
        raise RagexpInputError(f"browsers refuse to open port {port} (ERR_UNSAFE_PORT: it belongs to another protocol); "
                               f"pick another, e.g. --port {next_open_port(port)}", field="--port")
