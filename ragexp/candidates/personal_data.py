"""Personal data and secrets in a logged query: what kind, if any (the query is then left out).

:func:`sensitive_kind` returns the first kind found, checked in this order:

- ``e-mail address``: ``local@domain.tld``;
- ``card number``: 13-19 digits, single spaces or dashes allowed between them, passing the Luhn
  check (:func:`luhn_valid`);
- ``phone number``: 9-15 digits in groups separated by spaces, dots, dashes or parentheses, or
  7-15 after a leading ``+`` (a year range like ``1914-1918`` has 8 digits and no ``+``);
- ``secret``: a credential shape that :func:`ragexp.config.secrets.secret_kind` knows (``sk-...``,
  ``Bearer ...``, GitHub, Hugging Face, Slack, AWS, Google, GitLab tokens, JWTs, URL passwords), or
  a key-like run of 24+ letters and digits mixing upper case, lower case and at least 3 digits.
"""

from __future__ import annotations

import re

from ragexp.config.secrets import secret_kind

EMAIL = "e-mail address"
CARD = "card number"
PHONE = "phone number"
SECRET = "secret"
KINDS = (EMAIL, CARD, PHONE, SECRET)

_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d\w])\d(?:[ \-]?\d){12,18}(?![\d\w])")
_PHONE = re.compile(r"(?<![\w+])(\+)?\(?\d[\d\s().\-]{5,}\d(?![\w])")
_KEY_LIKE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9_\-+/=]{24,}(?![A-Za-z0-9])")


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum: doubling every second digit from the right, the digit sum is a multiple of 10."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _has_card(text: str) -> bool:
    return any(luhn_valid(re.sub(r"\D", "", match.group())) for match in _CARD.finditer(text))


def _has_phone(text: str) -> bool:
    for match in _PHONE.finditer(text):
        digits = sum(char.isdigit() for char in match.group())
        if 9 <= digits <= 15 or (match.group(1) and 7 <= digits <= 15):
            return True
    return False


def _has_key_like(text: str) -> bool:
    for match in _KEY_LIKE.finditer(text):
        token = match.group()
        if sum(c.isdigit() for c in token) >= 3 and any(c.islower() for c in token) and any(c.isupper() for c in token):
            return True
    return False


def sensitive_kind(text: str) -> str | None:
    """The kind of personal data or secret in ``text`` (one of :data:`KINDS`), else ``None``."""
    if "@" in text and _EMAIL.search(text):
        return EMAIL
    if _has_card(text):
        return CARD
    if _has_phone(text):
        return PHONE
    if secret_kind(text) or _has_key_like(text):
        return SECRET
    return None
