"""Keeping secrets out of configs: what looks like one, and the screens that refuse it.

A config is written to ``outputs/**/.hydra``, to the run's MLflow params and artifacts and to the
results JSON, so a secret in it would be kept in all of them. API keys therefore come only from
environment variables (``api_key_env`` names the variable), and these screens refuse, naming the
field and never echoing the value:

- a key NAME that means a secret (case-insensitive, ``_``/``-`` ignored): ``api_key``,
  ``openai_api_key``, ``token``, ``secret``, ``password``, ``authorization``, ... (:data:`SECRET_NAME_SUFFIXES`,
  :data:`SECRET_NAMES`); ``api_key_env`` and ``max_new_tokens`` are not secrets;
- a VALUE that looks like a credential, under any key: ``sk-...``, ``Bearer ...``, the prefixes of
  well-known token formats (:data:`_TOKEN_PATTERNS`), and URL userinfo with a password
  (``scheme://user:pass@host``);
- an ``api_key_env`` that is not an environment variable NAME (``[A-Za-z_][A-Za-z0-9_]*``), or is
  a long mixed-case-and-digit string (a key pasted where its variable's name belongs).

:func:`screen_overrides` runs on ``ragexp run``'s raw arguments before Hydra writes anything;
:func:`screen_config` on the composed, resolved config (a key can come from a config file or an
``${oc.env:...}`` interpolation) before anything is logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from ragexp.errors import RagexpInputError

#: Normalised key names (lower case, ``_`` and ``-`` removed) that hold a secret ...
SECRET_NAMES = frozenset({"token", "secret", "auth", "bearer", "credential", "credentials", "passphrase", "pwd"})
#: ... and endings that do (``openai_api_key``, ``client_secret``, ``db_password``).
SECRET_NAME_SUFFIXES = (
    "apikey", "apitoken", "accesstoken", "authtoken", "bearertoken", "refreshtoken", "secretkey", "clientsecret",
    "password", "passwd", "authorization", "privatekey", "accesskey",
)  # fmt: skip

URL_CREDENTIALS = "URL credentials (user:password@)"
_TOKEN_PATTERNS = [
    (URL_CREDENTIALS, re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:[^/\s@]+@")),  # first: the most specific advice
    ("an OpenAI-style key (sk-...)", re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{12,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}")),
    ("a payment-provider key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.")),
]  # fmt: skip

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEY_ENV_FIELD = "api_key_env"
WHERE_KEYS_GO = "export the key in an environment variable and name that variable with api_key_env"


def _normalised(name: str) -> str:
    return re.sub(r"[_\-]", "", name.lower())


def is_secret_name(name: str) -> bool:
    """Whether a config key (its last path segment) names a secret."""
    key = _normalised(name)
    return key in SECRET_NAMES or key.endswith(SECRET_NAME_SUFFIXES)


URL_TOKEN_USER = "a token as URL user name (token@host)"
URL_SECRET_PARAMETER = "a secret URL parameter (?key=..., #access_token=...)"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^\s/?#]*)([^\s?#]*)([?#][^\s]*)?")
#: Endings of URL query/fragment parameter names that carry a credential, besides the secret key names.
SECRET_PARAMETER_ENDINGS = ("key", "sig", "signature", "token", "code", "session", "sessionid", "jwt", "credential")


def _looks_like_a_token(text: str) -> bool:
    """16+ characters mixing letters and digits, without the separators of a name (``ragexp_ci``)."""
    return len(text) >= 16 and any(c.isdigit() for c in text) and any(c.isalpha() for c in text) and not any(
        c in text for c in "._ ")


def _url_secret(value: str) -> str | None:
    """Credentials in any URL inside ``value``: a user name shaped like a token, or a query or
    fragment parameter (``?api_key=``, ``&token=``, ``;sig=``, ``#access_token=``) named like a
    secret, or whose name or value is shaped like a token."""
    for match in _URL.finditer(value):
        host_part, _, tail = match.groups()
        if "@" in host_part and _looks_like_a_token(unquote(host_part.rsplit("@", 1)[0].split(":", 1)[0])):
            return URL_TOKEN_USER
        for pair in re.split(r"[?#&;]", tail or ""):
            name, _, parameter = (unquote(part).strip() for part in pair.partition("="))
            if _looks_like_a_token(name) or _looks_like_a_token(parameter) or (parameter and (
                    is_secret_name(name) or _normalised(name).endswith(SECRET_PARAMETER_ENDINGS))):
                return URL_SECRET_PARAMETER
    return None


def secret_kind(value: str) -> str | None:
    """What kind of credential ``value`` contains (e.g. ``"a bearer token"``), else ``None``."""
    for kind, pattern in _TOKEN_PATTERNS:
        if pattern.search(value):
            return kind
    return _url_secret(value) if "://" in value else None


def _looks_like_a_key(name: str) -> bool:
    """A long run of mixed case and digits: a pasted key, not an ``UPPER_SNAKE`` variable name."""
    return len(name) >= 20 and sum(c.isdigit() for c in name) >= 3 and any(c.islower() for c in name) and any(
        c.isupper() for c in name
    )


def check_env_var_name(value: Any, field: str) -> None:
    """``api_key_env`` must name an environment variable; refuse anything else without echoing it."""
    if not isinstance(value, str) or not ENV_NAME.fullmatch(value) or secret_kind(value) or _looks_like_a_key(value):
        raise RagexpInputError(
            "must be the NAME of an environment variable ([A-Za-z_][A-Za-z0-9_]*, e.g. OPENAI_API_KEY), and this "
            f"value is not one (it looks like a key or has other characters; not shown); {WHERE_KEYS_GO}",
            field=field,
        )


def _check_value(field: str, value: Any) -> None:
    leaf = field.rsplit(".", 1)[-1]
    if leaf == KEY_ENV_FIELD:
        check_env_var_name(value, field)
        return
    if is_secret_name(leaf) and value not in (None, ""):
        raise RagexpInputError(f"never put a secret in a config or override (value not shown); {WHERE_KEYS_GO}", field=field)
    if isinstance(value, str) and (kind := secret_kind(value)):
        raise RagexpInputError(f"the value contains {kind} (not shown); {_where_it_goes(kind)}", field=field)


WHERE_URL_CREDENTIALS_GO = (
    "configs are logged to MLflow and written to outputs/, so give the URL without them: for an MLflow server "
    "export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, for PostgreSQL PGPASSWORD or ~/.pgpass, for a "
    "model endpoint export the key and name it with api_key_env"
)


def _where_it_goes(kind: str) -> str:
    return WHERE_URL_CREDENTIALS_GO if kind in (URL_CREDENTIALS, URL_TOKEN_USER, URL_SECRET_PARAMETER) else f"configs are logged to MLflow and written to outputs/, so {WHERE_KEYS_GO}"


def override_key(arg: str) -> str | None:
    """The key of a Hydra override ``[+|++|~]key=value``; ``None`` for a flag (``-m``, ``--cfg``)."""
    if arg.startswith("-") or "=" not in arg:
        return None
    return arg.split("=", 1)[0].lstrip("+~")


def screen_overrides(args: Iterable[str]) -> None:
    """Refuse a secret in ``ragexp run``'s raw arguments (before Hydra composes or writes them).

    Key names are checked case-insensitively; every value (each sweep choice too) for credentials;
    any argument, flag or not, for credential patterns (``--config-dir=https://u:p@...``).
    """
    for raw in args:
        for arg in (raw, expand_env(raw)):
            _screen_override(arg)


#: ``${oc.env:NAME}`` or ``${oc.env:NAME,default}`` (the default may itself be one level of ``${...}``).
_ENV_INTERPOLATION = re.compile(r"\$\{(?:oc\.env|env):\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:,((?:[^{}]|\{[^{}]*\})*))?\}")


def expand_env(text: str) -> str:
    """``text`` with every ``${oc.env:NAME[,default]}`` replaced by what it resolves to on this
    machine: what Hydra would write for it (run dir, job name, sweep overrides, values)."""
    return _ENV_INTERPOLATION.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), text)


def _screen_override(arg: str) -> None:
    key = override_key(arg)
    if key is None:
        if kind := secret_kind(arg):
            raise RagexpInputError(f"an argument contains {kind} (not shown); {_where_it_goes(kind)}", field="argv")
        return
    *parents, leaf = key.split(".")
    for i, part in enumerate([*parents, leaf]):
        check_key_name(part, f"{'.'.join(parents[:i]) or '(top level)'} (a key there)")
    value = arg.split("=", 1)[1]
    if leaf == KEY_ENV_FIELD:
        for choice in value.split(","):
            check_env_var_name(choice.strip().strip("'\""), key)
        return
    _check_value(key, value)


def check_key_name(key: str, field: str) -> None:
    """A config KEY that is itself a credential (``+dataset.sk-...=1``) is refused like a value,
    named by its position only (the key is the secret)."""
    if kind := secret_kind(key):
        raise RagexpInputError(f"a config key contains {kind} (not shown); {_where_it_goes(kind)}", field=field)


def screen_config(config: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse a secret anywhere in a resolved config (nested mappings and lists walked), in key
    names as in values."""
    for key, value in config.items():
        check_key_name(str(key), f"{prefix.rstrip('.') or '(top level)'} (a key there)")
        field = f"{prefix}{key}"
        if isinstance(value, Mapping):
            screen_config(value, f"{field}.")
        elif isinstance(value, (list, tuple)):
            for i, element in enumerate(value):
                if isinstance(element, Mapping):
                    screen_config(element, f"{field}[{i}].")
                else:
                    _check_value(f"{field}[{i}]", element)
        else:
            _check_value(field, value)

