"""A search's time: over every session of it, and whether the next iteration fits its time limit.

The limit bounds the search, not only when its last iteration starts: an iteration started just before the
limit runs its whole evaluation past it (seconds each on the CPU, where Triton runs interpreted; `optimize
--budget 3m` searched 5 min 09 s, issue 55). So once this session has timed an iteration, the next starts
only when the time left holds one as long as the median of those so far. The start (iteration 0) is
evaluated whatever the limit: a search has nothing without it (optimize says when it alone overran).
"""

from __future__ import annotations

import statistics
import time


class SearchClock:
    def __init__(self, limit: float | None):
        self.limit = limit  # seconds of this session (EvolveConfig.time_limit), None: no limit
        self.started = time.monotonic()
        self.before = 0.0  # seconds of earlier sessions of a resumed run
        self.took: list[float] = []  # this session's iterations after the start, seconds each

    def elapsed(self) -> float:
        """Seconds the search has run, over every session of it."""
        return self.before + time.monotonic() - self.started

    def ended(self, iteration: int, seconds: float) -> None:
        if iteration > 0:
            self.took.append(seconds)

    def stop(self) -> str | None:
        """Why no iteration may start now (None: one may)."""
        if self.limit is None:
            return None
        used = time.monotonic() - self.started
        if used >= self.limit:
            return f"time limit reached ({self.limit:g} s)"
        expected = statistics.median(self.took) if self.took else 0.0
        if used + expected > self.limit:
            return (
                f"time limit reached ({self.limit:g} s): another iteration (about {expected:.2g} s each) would "
                "end past it"
            )
        return None
