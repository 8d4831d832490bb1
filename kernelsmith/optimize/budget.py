"""The search budget: its text (`20m`, `90s`, `1h30m`), and how it is split over the regions.

A region's search time is the budget's share that its share of the forward is of the searched regions'
shares: a region worth 1% of the forward gets a thirtieth of the time of one worth 30%, since the most it
can give the forward is a thirtieth. With W evaluation workers, W regions search at once, so the pool
holds W times the budget of search time; no region gets more than the budget itself (one search runs on
one worker at a time: more would run past the budget's wall time). What a region cannot use is not given
to another (that would break the proportion), so with more workers than regions the searches end early.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from kernelsmith.errors import UserError

_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([hms])")


def parse_budget(text: str, flag: str = "--budget") -> float:
    """Seconds of a budget: `90` or `90s`, `20m`, `1.5h`, `1h30m`; a bad one is one line naming the flag."""
    t = str(text).strip().lower().replace(" ", "")
    try:
        seconds = float(t)
    except ValueError:
        parts = _PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t or len({u for _, u in parts}) != len(parts):
            raise UserError(f"{flag} {text!r}: give seconds or a time such as 90s, 20m, 1h30m") from None
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise UserError(f"{flag} {text!r}: a budget is a finite time of at least 0 s")
    return seconds


def shown_time(seconds: float) -> str:
    """A duration as people write it: 45s, 2.5s, 12m30s, 1h05m."""
    if seconds < 10:
        return f"{seconds:.2g}s" if seconds < 1 else f"{seconds:.1f}s".replace(".0s", "s")
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s % 60 else f"{s // 60}m"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def split_budget(shares: Mapping[str, float], budget_s: float, slots: int = 1) -> dict[str, float]:
    """Each region's search time in seconds, in proportion to its share of the forward (the module's
    rule): `slots` searches at once hold `slots` x `budget_s` in all, and none gets more than `budget_s`.
    Shares that sum to nothing (an empty profile) split the budget evenly."""
    if not shares:
        return {}
    weights = {name: max(float(s), 0.0) if math.isfinite(s) else 0.0 for name, s in shares.items()}
    total = sum(weights.values())
    if total <= 0:
        weights, total = dict.fromkeys(weights, 1.0), float(len(weights))
    pool = budget_s * max(1, slots)
    return {name: min(budget_s, pool * w / total) for name, w in weights.items()}


def time_left(allotment_s: float, elapsed_s: float) -> float:
    """What a region's search may still spend (a killed or earlier search's time counts against it)."""
    return max(0.0, allotment_s - elapsed_s)


TIME_LIMIT = "time limit"  # how the engine's stop reason begins when a search's time ran out


def stop_said(
    stop_reason: str | None, elapsed_s: float | None, allotment_s: float | None, iterations: int = 1
) -> str | None:
    """A search's stop reason as optimize says it. A time limit in the search's own totals, every run of it
    against its share of the budget (the figures the table shows beside it), not the limit the engine was
    given for this run: "time limit reached (42.7 s)" beside "1m12s of 43s" read as two clocks (issue 55);
    and a start whose evaluation alone took longer than the share (no iteration after it) says so."""
    if not stop_reason or not stop_reason.startswith(TIME_LIMIT) or elapsed_s is None or allotment_s is None:
        return stop_reason
    spent = f"{shown_time(elapsed_s)} of its {shown_time(allotment_s)} share of the budget"
    if iterations == 0 and elapsed_s > allotment_s:
        return f"{TIME_LIMIT} reached: its start's evaluation alone took {spent}"
    said = f"{TIME_LIMIT} reached: {spent}"
    return said + ("; another iteration would have ended past it" if "another iteration" in stop_reason else "")
