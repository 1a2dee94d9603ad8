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

import re
from collections.abc import Iterable, Mapping
from typing import Any

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


def secret_kind(value: str) -> str | None:
    """What kind of credential ``value`` contains (e.g. ``"a bearer token"``), else ``None``."""
    for kind, pattern in _TOKEN_PATTERNS:
        if pattern.search(value):
            return kind
    return None


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
    return WHERE_URL_CREDENTIALS_GO if kind == URL_CREDENTIALS else f"configs are logged to MLflow and written to outputs/, so {WHERE_KEYS_GO}"


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
    for arg in args:
        key = override_key(arg)
        if key is None:
            if kind := secret_kind(arg):
                raise RagexpInputError(f"an argument contains {kind} (not shown); {_where_it_goes(kind)}", field="argv")
            continue
        value = arg.split("=", 1)[1]
        leaf = key.rsplit(".", 1)[-1]
        if leaf == KEY_ENV_FIELD:
            for choice in value.split(","):
                check_env_var_name(choice.strip().strip("'\""), key)
            continue
        _check_value(key, value)


def screen_config(config: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse a secret anywhere in a resolved config (nested mappings and lists walked)."""
    for key, value in config.items():
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

