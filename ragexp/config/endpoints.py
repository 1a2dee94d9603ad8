"""Model endpoints and their key variables come from this machine, not from a stored config.

A component that calls an HTTP model names ``base_url`` and ``api_key_env`` (the variable whose
value is sent as ``Authorization: Bearer``; ``OPENAI_API_KEY`` when unset), a black-box system
``url`` and ``secret_env`` (no key when unset): :data:`ENDPOINT_FIELDS` declares both, and every
block holding either URL key is checked, whichever optional keys it has. A stored config
(``ragexp reproduce``) or a hand-given one (``ragexp run --config-path``) that re-points either
would send this machine's secret to another host, so such a config may use only a pair that

- this machine's ``conf/`` names (``generator/*.yaml``, ``judge/*.yaml`` ..., its
  ``${oc.env:OPENAI_BASE_URL,...}`` resolved here), or
- the allow-list names: ``$RAGEXP_ALLOWED_ENDPOINTS`` and ``--allow-endpoint`` (comma-separated
  ``URL=VARIABLE``; a bare ``URL`` allows that endpoint with no key variable only).

Every URL is in the one canonical form of :mod:`ragexp.stored.urls` (an allow-list entry that is
not is refused, naming it; a URL of this machine's ``conf/`` that is not can match nothing), and
endpoints are compared by scheme, host (an IP address is not its host name), port (the scheme's
default filled in) and path without a trailing ``/``. :func:`check_endpoints` refuses any other
pair in one line naming both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from ragexp.config.compose import CONFIG_DIR
from ragexp.config.secrets import expand_env
from ragexp.errors import RagexpInputError
from ragexp.stored.urls import canonical_url

ALLOWED_ENDPOINTS_ENV = "RAGEXP_ALLOWED_ENDPOINTS"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"  # what an OpenAI-compatible model reads when api_key_env is not set


@dataclass(frozen=True)
class EndpointField:
    """A config key whose value is a URL a client sends requests to (``url``), the key naming the
    variable whose value goes with them (``key_env``), and the variable the client reads when
    that key is absent or null (``default_key_env``; ``None``: no key is sent)."""

    url: str
    key_env: str
    default_key_env: str | None


#: Every key under which a config names an endpoint: a model's ``base_url``
#: (:class:`~ragexp.llm.openai_compat.OpenAIChatModel`) and a black-box system's ``url``
#: (:class:`~ragexp.systems.http_system.HttpSystem`). The one declaration :func:`endpoint_uses`
#: reads: every mapping at any depth that holds one of these keys is an endpoint, whatever other
#: keys it has or lacks (a policy that looked for a sibling key was skipped by leaving it out).
ENDPOINT_FIELDS = (EndpointField("base_url", "api_key_env", DEFAULT_KEY_ENV), EndpointField("url", "secret_env", None))


def endpoint(url: Any, field: str = "base_url") -> str:
    """``scheme://host:port/path`` of the canonical ``url``, the form endpoints are compared in."""
    parsed = canonical_url(url, field=field)
    scheme, host, port = parsed.origin
    return f"{scheme}://{host}:{port}{parsed.path.rstrip('/')}"


def _local_endpoint(url: Any) -> str | None:
    try:
        return endpoint(url)
    except RagexpInputError:
        return None  # not canonical: no config URL (checked before this) can be it


def endpoint_uses(config: Any, prefix: str = "") -> Iterator[tuple[str, Any, str | None]]:
    """``(field, url, key variable)`` of every endpoint in ``config`` (:data:`ENDPOINT_FIELDS`). The
    key variable is the one the client reads, its default when the config leaves it absent or
    null; a block that names only a key variable is a use with no URL (``""``). ``field`` is the
    key a refusal names: the URL's (``generator.model.base_url``, ``system.url``), or the key
    variable's when there is no URL."""
    if isinstance(config, Mapping):
        for declared in ENDPOINT_FIELDS:
            if declared.url not in config and declared.key_env not in config:
                continue
            url = config.get(declared.url)
            key_env = config.get(declared.key_env)
            if key_env is None:
                key_env = declared.default_key_env if url not in (None, "") else None
            url = "" if url is None else url
            yield f"{prefix}{declared.url if url != '' else declared.key_env}", url, key_env
        for key, value in config.items():
            yield from endpoint_uses(value, f"{prefix}{key}.")
    elif isinstance(config, (list, tuple)):
        for i, value in enumerate(config):
            yield from endpoint_uses(value, f"{prefix.rstrip('.')}[{i}].")


def local_pairs() -> set[tuple[str, str | None]]:
    """The (endpoint, key variable) pairs this machine's ``conf/`` names, resolved here."""
    pairs = set()
    for file in CONFIG_DIR.rglob("*.yaml"):
        node = OmegaConf.load(file)
        try:
            data = OmegaConf.to_container(node, resolve=True)
        except Exception:  # noqa: BLE001 - a file interpolating other groups: read its blocks unresolved
            data = _resolve_env_only(OmegaConf.to_container(node, resolve=False))
        pairs |= {(_local_endpoint(url), key_env) for _, url, key_env in endpoint_uses(data) if url}
    return pairs


def _resolve_env_only(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {key: _resolve_env_only(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolve_env_only(value) for value in node]
    return expand_env(node) if isinstance(node, str) else node


def allowed_pairs(flags: Iterable[str] = ()) -> set[tuple[str, str | None]]:
    """The allow-list: ``$RAGEXP_ALLOWED_ENDPOINTS`` and ``--allow-endpoint`` values."""
    entries = [e.strip() for text in [os.environ.get(ALLOWED_ENDPOINTS_ENV, ""), *flags] for e in text.split(",")]
    pairs = set()
    for entry in filter(None, entries):
        url, _, key_env = entry.rpartition("=") if "=" in entry else (entry, "", "")
        pairs.add((endpoint(url, field=f"{ALLOWED_ENDPOINTS_ENV} / --allow-endpoint"), key_env.strip() or None))
    return pairs


def check_endpoints(config: Mapping, flags: Iterable[str] = ()) -> None:
    """Refuse an (endpoint, key variable) pair neither this machine's ``conf/`` nor the allow-list
    names, for every endpoint of :func:`endpoint_uses`."""
    uses = list(endpoint_uses(config))
    if not uses:
        return
    allowed = local_pairs() | allowed_pairs(flags)
    for field, url, key_env in uses:
        if url != "" and (endpoint(url, field=field), key_env) in allowed:
            continue
        if url == "" and key_env in {key for _, key in allowed}:
            continue  # a local model naming a known key variable: nothing is sent anywhere
        sends = f"the key in ${key_env}" if key_env else "requests (no key)"
        raise RagexpInputError(
            f"this config sends {sends} to {url or '(no endpoint)'}: neither this machine's conf/ nor the allow-list "
            f"names that pair (endpoints and key variables come from this machine); to allow it: "
            f"{ALLOWED_ENDPOINTS_ENV}={url}{'=' + key_env if key_env else ''} or --allow-endpoint",
            field=field)
