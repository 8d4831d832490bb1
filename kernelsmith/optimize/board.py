"""The live view of the searches: regions done / running / left, the best gain so far of each, and the
search time left (each region's allotment less what it has spent, over the searches that run at once).
Lines that scroll above it say each search's start, each new best and each end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kernelsmith.evaluate.measuring.roofline import fraction
from kernelsmith.evolve.engine import Event, Resumed
from kernelsmith.optimize.budget import TIME_LIMIT, shown_time, stop_said, time_left
from kernelsmith.optimize.runs import RunInfo
from kernelsmith.optimize.search import Hooks, Searched
from kernelsmith.progress import LiveProgress, counted


@dataclass
class Row:
    name: str
    allotment_s: float
    spent_s: float  # by earlier runs of its search
    state: str = "left"  # left, running, done, failed
    best: float | None = None  # the best kernel's speedup so far
    iterations: int = 0
    started: float | None = None  # time.monotonic() when this run's search of it began
    of_floor: float | None = None  # the fraction of its floor capture's time reached: its headroom (None: no card)

    @classmethod
    def of(cls, name: str, allotment_s: float, info: RunInfo, ready: bool, of_floor: float | None = None) -> Row:
        """A region's row as its run left it: a region searched on an earlier run shows its iterations and
        best, not "0 iterations" (issue 55)."""
        best = info.best.speedup if info.best is not None else None
        state = "left" if ready else "done"
        return cls(name, allotment_s, info.elapsed_s, state, best, info.iterations, of_floor=of_floor)


class Board:
    def __init__(self, rows: list[Row], slots: int, say: Callable[[str], None], view: LiveProgress | None):
        self.rows = {r.name: r for r in rows}
        self.slots, self.say, self.view = slots, say, view
        self.on_start: Callable[[str], None] = lambda name: None  # the work directory's state is told first
        self.on_end: Callable[[Searched], None] = lambda done: None
        self.hooks = Hooks(
            started=self._started, program=self._program, resumed=self._resumed, ended=self._ended, tick=self.draw
        )

    def left_s(self) -> float:
        """Search time left, all regions, spread over the searches that run at once."""
        now = time.monotonic()
        total = 0.0
        for r in self.rows.values():
            if r.state == "left":
                total += time_left(r.allotment_s, r.spent_s)
            elif r.state == "running" and r.started is not None:
                total += time_left(r.allotment_s, r.spent_s + now - r.started)
        return total / self.slots

    def _started(self, name: str) -> None:
        self.on_start(name)
        r = self.rows[name]
        r.state, r.started = "running", time.monotonic()
        self.say(f"{name}: searching, {shown_time(time_left(r.allotment_s, r.spent_s))} of search time left")
        self.draw()

    def _program(self, name: str, e: Event) -> None:
        r = self.rows[name]
        r.iterations = e.done
        if e.best is not None and e.best.speedup is not None:
            r.best = e.best.speedup
        if e.improved and e.best is not None:
            self.say(
                f"{name}: new best {e.best.speedup or 0:.3g}x (program #{e.best.id}, iteration {e.best.iteration})"
            )
        self.draw()

    def _resumed(self, name: str, resumed: Resumed) -> None:
        r = self.rows[name]
        r.iterations = resumed.done
        r.best = resumed.best.speedup if resumed.best is not None else None

    def _ended(self, done: Searched) -> None:
        self.on_end(done)
        r = self.rows[done.name]
        r.state = "failed" if done.failed else "done"
        if done.failed:
            self.say(f"{done.name}: {done.failed}")
        elif done.summary is not None:
            best = done.summary.get("best") or {}
            speed = f"best {best['speedup']:.3g}x" if best.get("speedup") is not None else "no correct kernel"
            its = done.summary["iterations_done"]  # every run's (the store holds them), as the table says
            stop = stop_said(done.summary["stop_reason"], done.summary.get("elapsed_s"), r.allotment_s, its) or ""
            if done.cut_s is not None and stop.startswith(TIME_LIMIT):
                stop += (
                    f" (the budget had {shown_time(done.cut_s)} left for it: the searches before it ran past theirs)"
                )
            self.say(f"{done.name}: {stop}; {counted(its, 'iteration')}, {speed}")
        self.draw()

    def lines(self) -> list[str]:
        width = max((len(n) for n in self.rows), default=0)
        out = []
        for r in self.rows.values():
            best = f"{r.best:.3g}x" if r.best is not None else "-"
            light = f"  captured at {fraction(r.of_floor)} of its speed of light" if r.of_floor is not None else ""
            out.append(f"{r.name:<{width}}  {r.state:<7}  best {best:<7}  {counted(r.iterations, 'iteration')}{light}")
        return out

    def draw(self) -> None:
        if self.view is None:
            return
        counts = {s: sum(1 for r in self.rows.values() if r.state == s) for s in ("done", "running", "left", "failed")}
        done = counts["done"] + counts["failed"]
        title = f"regions searched (search time left {shown_time(self.left_s())})"
        self.view.board({s: n for s, n in counts.items() if n}, self.lines(), title, (done, len(self.rows)))
