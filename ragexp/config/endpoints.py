"""Model endpoints and their key variables come from this machine, not from a stored config.

A component that calls an HTTP model names ``base_url`` and ``api_key_env`` (the variable whose
value is sent as ``Authorization: Bearer``; ``OPENAI_API_KEY`` when unset). A stored config
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
from typing import Any

from omegaconf import OmegaConf

from ragexp.config.compose import CONFIG_DIR
from ragexp.config.secrets import expand_env
from ragexp.errors import RagexpInputError
from ragexp.stored.urls import canonical_url

ALLOWED_ENDPOINTS_ENV = "RAGEXP_ALLOWED_ENDPOINTS"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"  # what an OpenAI-compatible model reads when api_key_env is not set
#: A black-box system's endpoint and key variable (conf/system/http.yaml).
SYSTEM_URL, SYSTEM_KEY_ENV = "url", "secret_env"


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


def endpoint_uses(config: Any, prefix: str = "") -> Iterator[tuple[str, str, str | None]]:
    """``(field, base_url, api_key_env)`` of every block in ``config`` that names a ``base_url``
    (``api_key_env`` defaulted as the model does) or an ``api_key_env`` alone; a black-box
    system's endpoint (``system=http``: ``url`` with its ``secret_env``) as ``(system, url, secret_env)``."""
    if isinstance(config, Mapping):
        if SYSTEM_URL in config and SYSTEM_KEY_ENV in config and config.get(SYSTEM_URL):
            yield prefix.rstrip("."), str(config[SYSTEM_URL]), config.get(SYSTEM_KEY_ENV)
        if "base_url" in config or "api_key_env" in config:
            key_env = config.get("api_key_env", DEFAULT_KEY_ENV if config.get("base_url") else None)
            yield prefix.rstrip("."), str(config.get("base_url") or ""), key_env
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


def _url_key(config: Mapping, field: str) -> str:
    """``url`` for a system's block, ``base_url`` for a model's."""
    node: Any = config
    for part in field.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return SYSTEM_URL if isinstance(node, Mapping) and SYSTEM_URL in node and "base_url" not in node else "base_url"


def check_endpoints(config: Mapping, flags: Iterable[str] = ()) -> None:
    """Refuse a (base_url, api_key_env) pair neither this machine's ``conf/`` nor the allow-list names."""
    uses = list(endpoint_uses(config))
    if not uses:
        return
    allowed = local_pairs() | allowed_pairs(flags)
    for field, url, key_env in uses:
        if url and (endpoint(url, field=f"{field}.base_url"), key_env) in allowed:
            continue
        if not url and key_env in {key for _, key in allowed}:
            continue  # a local model naming a known key variable: nothing is sent anywhere
        sends = f"the key in ${key_env}" if key_env else "requests (no key)"
        raise RagexpInputError(
            f"this config sends {sends} to {url or '(no endpoint)'}: neither this machine's conf/ nor the allow-list "
            f"names that pair (endpoints and key variables come from this machine); to allow it: "
            f"{ALLOWED_ENDPOINTS_ENV}={url}{'=' + key_env if key_env else ''} or --allow-endpoint",
            field=f"{field}.{_url_key(config, field)}" if url else f"{field}.api_key_env")
