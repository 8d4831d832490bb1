"""A search's time as `optimize` spends and says it (issue 55): the budget bounds the searches together (an
iteration that would end past a limit does not start; a search that overran takes its overrun from those
after it; one whose turn comes with no time left says so), and every line says the search's totals over
every run of it, against its share of the budget."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import kernelsmith.optimize.search as search
from kernelsmith.evolve.clock import SearchClock
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.program import Program
from kernelsmith.optimize.board import Board, Row
from kernelsmith.optimize.budget import stop_said
from kernelsmith.optimize.runs import RunInfo


def test_an_iteration_that_would_end_past_the_limit_does_not_start(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    clock = SearchClock(10.0)
    clock.ended(0, 6.0)  # the start: never a prediction (it is evaluated whatever the limit)
    now[0] = 109.9
    assert clock.stop() is None
    clock.ended(1, 3.0)
    clock.ended(2, 3.0)
    now[0] = 105.0
    assert clock.stop() is None  # 5 s used, an iteration of 3 s ends at 8
    now[0] = 107.5
    assert clock.stop() == "time limit reached (10 s): another iteration (about 3 s each) would end past it"
    now[0] = 110.0
    assert clock.stop() == "time limit reached (10 s)"
    assert SearchClock(None).stop() is None


class _Engine:
    """A search that takes its time limit plus `over` seconds (its start's evaluation overran), and says
    which limit it was given."""

    limits: dict[str, float | None] = {}
    over = {"first": 0.3}

    def __init__(self, task, cfg, run_dir, backend, llm, seed, on_program=None, on_resume=None):
        self.name, self.cfg = Path(run_dir).name, cfg
        self.store = SimpleNamespace(close=lambda: None)

    async def run(self) -> dict:
        _Engine.limits[self.name] = self.cfg.time_limit
        await asyncio.sleep((self.cfg.time_limit or 0.0) + _Engine.over.get(self.name, 0.0))
        return {"stop_reason": "time limit reached", "iterations_done": 0, "elapsed_s": self.cfg.time_limit}


def test_the_budget_bounds_the_searches_together(monkeypatch, tmp_path):
    monkeypatch.setattr(search, "Engine", _Engine)
    monkeypatch.setattr(search, "write_run_report", lambda run_dir: None)
    monkeypatch.setattr(search, "open_llms", lambda cfg, n: [None] * n)
    monkeypatch.setattr(search, "MIN_LEFT_S", 0.1)  # at this test's scale (it lasts 1.6 s)
    started = RunInfo(exists=True, start=Program(0, 0, "seed", "", "correct"))  # fourth: its start is stored
    monkeypatch.setattr(search, "run_info", lambda run_dir: started if run_dir.name == "fourth" else RunInfo())
    cfg = EvolveConfig().model_copy(update={"time_limit": 0.5})
    names = ("first", "second", "third", "fourth", "fifth")
    searches = [search.Search(n, None, tmp_path / n, None, cfg) for n in names]  # type: ignore[arg-type]
    began = time.monotonic()
    done = search.run_searches(searches, SimpleNamespace(workers=1), wall_s=1.5)  # type: ignore[arg-type]
    # first: its 0.5 s and 0.3 more; second: its own 0.5 s; third: the 0.2 s left of the 1.5, not its own
    # 0.5 (the first's overrun is taken from it, not from the user); fourth: no time left, and its start is
    # stored; fifth: its start is evaluated whatever the time (MIN_LEFT_S), the patch is made from starts too
    assert [_Engine.limits.get(n) for n in names] == [0.5, 0.5, pytest.approx(0.2, abs=0.1), None, 0.1]
    assert time.monotonic() - began < 1.5 + 0.1 + 0.2
    assert done[3].failed == search.OUT_OF_TIME and done[3].crashed  # said, and searched on the next run
    assert all(d.failed is None for d in (*done[:3], done[4])) and [d.cut_s for d in done[:2]] == [None, None]
    assert done[2].cut_s == pytest.approx(0.2, abs=0.1)  # its end says so


def test_a_time_limit_is_said_in_the_searchs_totals():
    """ "9 it, 1m12s of 43s" beside "time limit reached (42.7 s)": two clocks. Now one, its totals."""
    assert stop_said("time limit reached (42.7 s)", 72.0, 43.0, 9) == (
        "time limit reached: 1m12s of its 43s share of the budget"
    )
    assert stop_said("time limit reached (22 s)", 56.0, 22.0, 0) == (
        "time limit reached: its start's evaluation alone took 56s of its 22s share of the budget"
    )
    limit = "time limit reached (9.1 s): another iteration (about 2.1 s each) would end past it"
    assert stop_said(limit, 7.5, 9.1, 3) == (
        "time limit reached: 7.5s of its 9.1s share of the budget; another iteration would have ended past it"
    )
    assert stop_said("done", 72.0, 43.0, 9) == "done"


def test_the_board_shows_what_each_run_holds_and_says_its_end_in_totals():
    info = RunInfo(
        exists=True, iterations=12, elapsed_s=16.7, best=Program(2, 0, "tune", "", "correct", speedup=0.0049)
    )
    rows = [Row.of("earlier", 21.2, info, ready=False), Row.of("now", 9.1, RunInfo(), ready=True)]
    said: list[str] = []
    board = Board(rows, 1, said.append, None)
    assert board.lines()[0] == "earlier  done     best 0.0049x  12 iterations"  # not "best -  0 iterations"
    summary = {"stop_reason": "time limit reached (9.1 s)", "iterations_done": 5, "elapsed_s": 10.1, "best": None}
    board.hooks.ended(search.Searched("now", summary=summary))
    assert said == ["now: time limit reached: 10s of its 9.1s share of the budget; 5 iterations, no correct kernel"]
    board.hooks.ended(search.Searched("earlier", summary={**summary, "elapsed_s": 3.0}, cut_s=3.0))
    assert said[-1] == (
        "earlier: time limit reached: 3s of its 21s share of the budget (the budget had 3s left for it: the searches "
        "before it ran past theirs); 5 iterations, no correct kernel"
    )
