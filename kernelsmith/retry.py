"""What the retry policies share: one Retry-After parser, and the failed attempt's exception.

The policies themselves are tenacity's (the LLM client's in llm/client.py, the evaluation
service client's in evaluate/backends/remote.py). Standard library and tenacity only, and
nothing from kernelsmith: this module sits at the bottom layer, so both can use it.
"""

from __future__ import annotations

import email.utils
import math
import time
from datetime import UTC
from typing import overload

from tenacity import RetryCallState

# A server asking for a longer pause than this is treated as asking for this much.
MAX_RETRY_AFTER_S = 600.0


@overload
def parse_retry_after(
    value: str | None, default: float, *, cap: float = MAX_RETRY_AFTER_S, unit: float = 1.0, now: float | None = None
) -> float: ...


@overload
def parse_retry_after(
    value: str | None,
    default: None = None,
    *,
    cap: float = MAX_RETRY_AFTER_S,
    unit: float = 1.0,
    now: float | None = None,
) -> float | None: ...


def parse_retry_after(
    value: str | None,
    default: float | None = None,
    *,
    cap: float = MAX_RETRY_AFTER_S,
    unit: float = 1.0,
    now: float | None = None,
) -> float | None:
    """Seconds to wait from a Retry-After header value: delta-seconds or an HTTP date (RFC 9110).

    Missing, empty or unreadable -> `default`; negative, or a date in the past -> 0; more than
    `cap` -> `cap`. `unit` is the seconds per number (1e-3 for the Retry-After-Ms header some
    APIs send); a date is read only when it is 1. `now` (a time.time()) is for tests.
    """
    if value is None:
        return default
    text = str(value).strip()
    if not text:
        return default
    try:
        seconds = float(text) * unit
    except ValueError:
        if unit != 1.0:
            return default
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return default
        if when.tzinfo is None:  # "-0000" reads as naive; an HTTP date is always GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return default
    return min(max(seconds, 0.0), cap)


def failure(retry_state: RetryCallState) -> BaseException | None:
    """The exception the attempt that tenacity is deciding about raised (None if it returned)."""
    outcome = retry_state.outcome
    return outcome.exception() if outcome is not None and outcome.failed else None
