"""Hydra and OmegaConf config errors as the one line every ragexp input error is.

Hydra reports a bad override over 7-13 lines and answers a typo with "To append to your config
use +key=value"; :func:`config_error_line` names the key instead and suggests the closest known
key (``difflib``): ``field 'chunking.sise': unknown key; did you mean 'size'? ...``.
"""

from __future__ import annotations

import difflib
import re

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    OmegaConfBaseException,
)

#: What ``ragexp run`` turns into one line and exit code 2 (raised before or while composing).
CONFIG_ERRORS = (HydraException, OmegaConfBaseException)


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def config_error_line(err: BaseException) -> str:
    """One line naming the key (or the config group) and what to do."""
    cause = err.__cause__ if isinstance(err.__cause__, OmegaConfBaseException) else err
    if isinstance(err, MissingConfigException):
        return _missing_option(str(err))
    if isinstance(err, OverrideParseException):
        return f"bad override syntax: {_first_line(str(err))} (grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)"
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        return _unknown_key(cause)
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        return f"field '{cause.full_key}': {_first_line(cause.msg)}"
    line = _first_line(str(err))
    return f"{line}: {_first_line(str(cause))}" if cause is not err and str(cause) else line


def _unknown_key(cause: OmegaConfBaseException) -> str:
    key = str(cause.key)
    parent = getattr(cause, "parent_node", None)
    known = [str(k) for k in parent.keys()] if parent is not None and hasattr(parent, "keys") else []
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    listed = f"known keys here: {', '.join(k for k in known if k != '_target_')}" if known else "no keys here"
    add = "; a parameter the component takes but the config does not list is added with +KEY=VALUE" if "_target_" in known else ""
    return f"field '{cause.full_key}': unknown key; {hint}{listed}{add}"


def _missing_option(message: str) -> str:
    """``Could not find 'embedding/nope'`` plus the group's options, on one line."""
    head = re.search(r"Could not find '([^']+)'", message)
    options = re.findall(r"^\t(\S+)$", message.split("Config search path:")[0], flags=re.MULTILINE)
    if head is None:
        return _first_line(message)
    wanted = head.group(1).rsplit("/", 1)[-1]
    close = difflib.get_close_matches(wanted, options, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    group = head.group(1).rsplit("/", 1)[0]
    return f"Could not find '{head.group(1)}': available options in '{group}': {', '.join(options) or 'none'}{hint}"
