"""When to retry a failed model request, and how long to wait first.

Exponential backoff with full jitter: before retry ``n`` (``n = 0, 1, ...``) wait
``uniform(0, min(backoff_max_s, backoff_base_s * 2**n))`` seconds. A ``Retry-After`` header
(delta-seconds or an HTTP-date) replaces the jittered delay, capped at ``backoff_max_s`` so a
hostile or broken server cannot stall a sweep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

RETRYABLE_KINDS = frozenset({"timeout", "connection", "http_5xx"})
"""Failure kinds that are retried; among ``http_4xx`` only status 429 is."""


def is_retryable(kind: str, status: int | None) -> bool:
    return kind in RETRYABLE_KINDS or status == 429


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (RFC 9110: delta-seconds or HTTP-date);
    ``None`` when absent or unparseable. A date in the past gives 0."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())


@dataclass
class BackoffPolicy:
    """``max_retries`` retries after the first attempt, so at most ``max_retries + 1`` requests."""

    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError("max_retries, backoff_base_s and backoff_max_s must be >= 0")

    def delay(self, retry_index: int, retry_after_s: float | None = None) -> float:
        """Seconds to sleep before retry number ``retry_index`` (0-based)."""
        if retry_after_s is not None:
            return min(retry_after_s, self.backoff_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**retry_index)
        return self.rng.uniform(0.0, ceiling)
