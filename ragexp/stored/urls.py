"""One URL policy for every URL this machine sends credentials or data to.

A tracking server (``tracking.uri``), an artifact location or URI a store hands back, and a
model endpoint (``base_url``) each receive this machine's secrets (``MLFLOW_TRACKING_*``, an API
key). A check that reads a URL one way while the HTTP client reads it another sends them
elsewhere: ``http://good.host\\@evil.com/`` is ``evil.com`` to ``urllib.parse`` and httpx but
``good.host`` to urllib3/requests. So ragexp does not compare spellings; it accepts a URL only in
one canonical form that every client reads alike, and uses the form it serialised itself:

    URL    = scheme "://" host [":" port] path  |  "mlflow-artifacts:" path
    scheme = "http" | "https" | "mlflow-artifacts"       (lower case; which ones, per use)
    host   = DNS name: labels of [a-z0-9-] (no leading or trailing "-", 1-63 characters), joined
             by ".", at most 253 characters, no trailing ".", and not ending in a numeric label
             (``127.1``, ``0x7f.1`` are addresses to a resolver)
           | IPv4 address: four decimal numbers 0-255 without leading zeros
           | "[" IPv6 address "]" as Python's ``ipaddress`` writes it (lower case, compressed,
             no zone id: ``[fe80::1%25eth0]`` names an interface of this machine, and clients
             read the ``%`` differently)
    port   = 1-65535 in decimal, no leading zero
    path   = ("/" segment)*, segment = RFC 3986 unreserved, sub-delims, ":" or %XX (upper-case
             hex), never "." or ".." alone

No user info (``@``), query, fragment, backslash, white space, control or non-ASCII character,
anywhere: ``urllib.parse`` (and so MLflow) drops leading C0 controls and spaces and every tab and
newline before it reads the scheme, so `` http://h/`` or ``ht\ttp://h/`` is ``http://h/`` to MLflow.
The text accepted is exactly the serialisation of what was parsed (``Url.text == text``).
:func:`canonical_url` refuses anything else in one line that shows the URL's canonical spelling
where there is one (``HTTP://Host/`` -> ``http://host/``): the text used is always
:attr:`Url.text`, the serialisation of what was checked, so the host checked is the host the
client connects to (``tests/security/test_url_policy.py`` checks this against urllib3, requests,
httpx, MLflow's artifact resolution and ``urllib.parse`` over generated spellings).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from ragexp.errors import RagexpInputError

HTTP_SCHEMES = ("http", "https")
#: The port an HTTP client connects to when the URL names none. ``mlflow-artifacts`` has none of
#: its own: MLflow resolves such a URI to the tracking server's scheme (:func:`ragexp.tracking.store.artifact_origin`).
DEFAULT_PORTS = {"http": 80, "https": 443}
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?://(?P<authority>[^/]*))?(?P<path>/.*)?")
_AUTHORITY = re.compile(r"(?P<host>\[[^\]/]*\]|[^:\[\]]*)(?::(?P<port>[^:]*))?")
_SEGMENT = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-F]{2})*")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_IPV4 = re.compile(r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}")
_PORT = re.compile(r"[1-9][0-9]{0,4}")


@dataclass(frozen=True)
class Url:
    """A URL in canonical form (module docstring); ``host`` is ``""`` only for ``mlflow-artifacts:/path``."""

    scheme: str
    host: str
    port: int | None
    path: str

    @property
    def text(self) -> str:
        """The canonical spelling: what every client is given."""
        if not self.host:
            return f"{self.scheme}:{self.path}"
        return f"{self.scheme}://{self.host}{'' if self.port is None else f':{self.port}'}{self.path}"

    @property
    def origin(self) -> tuple[str, str, int | None]:
        """``(scheme, host, port)`` with the scheme's default port filled in."""
        return self.scheme, self.host, self.port if self.port is not None else DEFAULT_PORTS.get(self.scheme)


class _NotCanonical(ValueError):
    pass


def canonical_url(text: object, *, field: str, schemes: tuple[str, ...] = HTTP_SCHEMES) -> Url:
    """``text`` as a :class:`Url` when it is in canonical form with one of ``schemes``; else one
    :class:`RagexpInputError` naming ``field`` (and the canonical spelling, when there is one)."""
    try:
        return parse_canonical(text, schemes)
    except _NotCanonical as err:
        hint = _suggestion(text, schemes)
        raise RagexpInputError(f"{err} in {_shown(text)}; ragexp sends data only to a URL in canonical form "
                               f"(scheme://host[:port]/path, lower case, no user info, query or fragment)"
                               f"{f': write {hint}' if hint else ''}", field=field) from None


def parse_canonical(text: object, schemes: tuple[str, ...] = HTTP_SCHEMES) -> Url:
    """The :class:`Url` of ``text``, or :class:`_NotCanonical` (a ``ValueError``) saying why not."""
    if not isinstance(text, str):
        raise _NotCanonical(f"not a text but {type(text).__name__}")
    if not text.isascii() or any(c <= " " or c in "\\\x7f" for c in text):
        raise _NotCanonical("a space, backslash, control or non-ASCII character")
    match = _URL.fullmatch(text)
    if match is None:
        raise _NotCanonical("no scheme")
    scheme, authority, path = match["scheme"], match["authority"], match["path"] or ""
    if scheme != scheme.lower():
        raise _NotCanonical("an upper-case letter in the scheme")
    if scheme not in schemes:
        raise _NotCanonical(f"the scheme {scheme!r} is not one of {', '.join(schemes)}")
    for segment in path.split("/")[1:]:
        if not _SEGMENT.fullmatch(segment) or segment in (".", ".."):
            raise _NotCanonical("a path character or segment clients read differently (@ ? # . ..)")
    if authority is None:
        if scheme != "mlflow-artifacts" or not path:
            raise _NotCanonical("no //host")
        return Url(scheme, "", None, path)
    if "@" in authority:
        raise _NotCanonical("user info (@)")
    parts = _AUTHORITY.fullmatch(authority)
    if parts is None:
        raise _NotCanonical("a host:port clients read differently")
    port = parts["port"]
    if port is not None and (not _PORT.fullmatch(port) or int(port) > 65535):
        raise _NotCanonical("a port that is not 1-65535 in plain decimal")
    url = Url(scheme, _canonical_host(parts["host"]), None if port is None else int(port), path)
    if url.text != text:  # the invariant the rules above keep: the text checked is the text handed on
        raise _NotCanonical(f"not its canonical spelling {url.text}")
    return url


def _canonical_host(host: str) -> str:
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise _NotCanonical("not an IPv6 address in brackets") from None
        if address.scope_id is not None:
            raise _NotCanonical("an IPv6 zone id (%...)")
        if f"[{address}]" != host:
            raise _NotCanonical(f"an IPv6 address not in its canonical form [{address}]")
        return host
    if _IPV4.fullmatch(host):
        return host
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise _NotCanonical("not a host name of lower-case letters, digits and - (or an IP address)")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        raise _NotCanonical("a host name ending in a number (a resolver reads it as an address)")
    return host


def _suggestion(text: object, schemes: tuple[str, ...]) -> str | None:
    """The canonical spelling of a URL that differs only in letter case or a default of spelling."""
    if not isinstance(text, str) or not text.isascii():
        return None
    scheme, sep, rest = text.partition("://")
    if not sep:
        return None
    authority, slash, path = rest.partition("/")
    candidate = f"{scheme.lower()}://{authority.lower().rstrip('.')}{slash}{path}"
    try:
        return parse_canonical(candidate, schemes).text if candidate != text else None
    except _NotCanonical:
        return None


def _shown(text: object) -> str:
    if isinstance(text, str) and "@" in text:
        return "the URL (not shown: it has user info)"
    shown = repr(text)
    return shown if len(shown) <= 120 else shown[:117] + "..."
