"""A search's pace (issue 56): how many evaluations it judged, how many a minute of its search time, and
where their time went, phase by phase (the verdicts' StageSeconds, summed).

Read from the run's stored programs, every session of the run: each judged program keeps its verdict's
stages (`eval.stages`). A program that took the verdict of another (the same program up to formatting:
evolve/reuse.py) or that holds no program was not judged and is not counted. Evaluations stored as no
program are not counted either: a CPU run's noise-floor repeats (evolve/noise_floor.py) and the counters
stage (evolve/profiling.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from kernelsmith.evaluate.result import StageSeconds
from kernelsmith.evolve.program import REUSED_FROM

PHASES = tuple(name for name, f in StageSeconds.model_fields.items() if f.annotation is float and name != "total")
OTHER = "other"  # an evaluation's time in none of its stages: the verdict's own work, messages
SHOWN_SHARE = 0.005  # a phase under half a percent of the time is left out of the line


class Pace(BaseModel):
    """summary.json's `evaluations`; `optimize.json`'s `result.evaluations` (every region's, summed)."""

    count: int = 0  # evaluations judged
    per_minute: float | None = None  # of search time (elapsed_s; None: no time measured)
    seconds: float = 0.0  # the evaluations' own time, summed (their stages' `total`)
    phases: dict[str, float] = Field(default_factory=dict)  # phase -> seconds summed; `other`: the rest

    def shares(self) -> dict[str, float]:
        """Each phase's share of the evaluations' time, largest first."""
        if self.seconds <= 0:
            return {}
        shares = {name: s / self.seconds for name, s in self.phases.items()}
        return dict(sorted(shares.items(), key=lambda kv: -kv[1]))

    def line(self) -> str:
        """The pace in one line: `evaluations: 12 judged, 8.4 a minute of search time; their time: ...`."""
        said = f"evaluations: {self.count} judged"
        if self.per_minute is not None:
            said += f", {self.per_minute:.3g} a minute of search time"
        shown = [f"{name} {share:.0%}" for name, share in self.shares().items() if share >= SHOWN_SHARE]
        return said + (f"; their time: {', '.join(shown)}" if shown else "")


def judged_stages(record: dict | None) -> StageSeconds | None:
    """The stages of a stored verdict that was judged for its program; None: none was (no program, or
    another program's verdict reused)."""
    if not record or record.get(REUSED_FROM) is not None or not isinstance(record.get("stages"), dict):
        return None
    return StageSeconds.model_validate(record["stages"])


def pace_of(records: Iterable[dict | None], search_s: float) -> Pace:
    """The pace of a run whose stored verdict records are `records`, over `search_s` seconds of search."""
    stages = [s for s in map(judged_stages, records) if s is not None]
    phases: dict[str, float] = {name: sum((float(getattr(s, name)) for s in stages), 0.0) for name in PHASES}
    total = sum((s.total for s in stages), 0.0)
    phases[OTHER] = max(0.0, total - sum(phases.values()))
    return _pace(len(stages), total, phases, search_s)


def combined(paces: Iterable[Pace], search_s: float) -> Pace:
    """Several runs' paces as one, over `search_s` seconds of search (theirs, summed)."""
    paces = list(paces)
    phases: dict[str, float] = {}
    for p in paces:
        for name, s in p.phases.items():
            phases[name] = phases.get(name, 0.0) + s
    return _pace(sum(p.count for p in paces), sum(p.seconds for p in paces), phases, search_s)


def _pace(count: int, seconds: float, phases: dict[str, float], search_s: float) -> Pace:
    return Pace(
        count=count,
        per_minute=round(60.0 * count / search_s, 3) if search_s > 0 else None,
        seconds=round(seconds, 3),
        phases={name: round(s, 3) for name, s in phases.items()},
    )
