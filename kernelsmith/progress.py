"""Live terminal progress for long commands: a bar with ETA, the best so far, counts per status.

One class serves `evolve`, `evolve-suite`, `bench` and `optimize` (whose board shows a line per region).
Lines printed through `say` scroll above
the live part; on a terminal that is not interactive (CI logs, pipes) the live part is drawn
once when it stops, so logs hold the final state and every line, without redraw noise. Nothing is
drawn before the work says where it stands (a first step, or a resumed run's stored state): a
command refused at its start shows its error alone, not an empty bar and "no correct program yet"
above a run that has correct programs.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

STATUS_STYLE = {
    "correct": "green",
    "flagged": "yellow",
    "incorrect": "red",
    "compile_error": "dark_orange",
    "runtime_error": "magenta",
    "timeout": "magenta",
    "rejected": "grey50",
    "no_program": "grey50",
    "missing": "grey50",
    "done": "green",  # the states of a unit of work on a board (optimize's regions)
    "running": "cyan",
    "left": "grey50",
    "failed": "red",
}


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """ "1 iteration", "3 iterations": a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


class LiveProgress:
    def __init__(self, console: Console, what: str, total: int):
        self.console = console
        self.counts: Counter[str] = Counter()
        self.best: str | None = None  # None: not known yet (nothing stepped or resumed)
        self.known = False  # whether anything was stepped or resumed: until then nothing is drawn
        self.lines: list[str] = []  # a board's line per unit of work (board())
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
        )
        self.bar = self.progress.add_task(what, total=total)
        self.live = Live(
            self._render(),
            console=console,
            refresh_per_second=4,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def _render(self) -> Group:
        if not self.known:
            return Group()
        counts = Text("  ")
        for status, n in sorted(self.counts.items()):
            counts.append(f"{status} {n}  ", style=STATUS_STYLE.get(status, ""))
        best = [Text(f"  best so far: {self.best}", style="bold")] if self.best is not None else []
        return Group(self.progress, *best, counts, *(Text(f"  {line}") for line in self.lines))

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)
        if self.known and not self.console.is_terminal:  # drawn once, with no line end: the next print starts one
            self.console.line()

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)

    def reset(self, what: str, total: int, completed: int = 0) -> None:
        """Start over for another unit of work (the next task of a suite)."""
        self.counts.clear()
        self.best = None
        self.progress.reset(self.bar, total=total, completed=completed, description=what)
        self.live.update(self._render())

    def resume(self, completed: int, counts: dict[str, int], best: str | None) -> None:
        """Start from what a resumed run has stored: its iterations done, counts per status, best."""
        self.counts = Counter(counts)
        self.known, self.best = True, best or "no correct program yet"
        self.progress.reset(self.bar, completed=completed)  # a fresh clock: the ETA counts this session
        self.live.update(self._render())

    def step(self, status: str, best: str | None = None, completed: int | None = None) -> None:
        self.counts[status] += 1
        self.known, self.best = True, best or self.best or "no correct program yet"
        if completed is None:
            self.progress.advance(self.bar)
        else:
            self.progress.update(self.bar, completed=completed)
        self.live.update(self._render())

    def board(self, counts: dict[str, int], lines: list[str], title: str, done: tuple[int, int]) -> None:
        """Show where several units of work stand (a model's regions): how many are in each state, one line
        per unit under them; `done`: (finished, total) for the bar."""
        self.counts, self.lines, self.known = Counter(counts), lines, True
        self.progress.update(self.bar, completed=done[0], total=done[1], description=title)
        self.live.update(self._render())
