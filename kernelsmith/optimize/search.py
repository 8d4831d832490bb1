"""The regions' searches on one evaluation pool: as many at once as the pool has workers (each search
keeps at least one worker busy), the heaviest first, each with its own time limit (its share of the
budget, less what earlier runs of it spent). Each is `kernelsmith evolve`'s engine on the region's task,
its run directory resumed where a killed run left it.

The budget bounds the searches together: each starts with the lesser of its own time left and the wall
time left to them all (`wall_s`), so that one that ran past its share (a start whose evaluation alone took
longer) takes that time from those after it, not from the user; one whose turn comes with less than
MIN_LEFT_S of it left does not go on past its start (a start is evaluated whatever the time: the patch is
made from starts too), and one whose start is stored does not run: it says so in one line, and is searched
on the next run.

A search that cannot run (a seed the tuner cannot start from, a run directory of another task) ends in
one line and the others go on; so does one that raised though the user did nothing wrong (an evaluation
worker that failed, a bug of ours: failure.py keeps its traceback). An LLM that cannot be reached ends
them all (it would fail each alike).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.errors import UserError, one_line
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.engine import Engine, Event, Resumed
from kernelsmith.evolve.run import open_llms
from kernelsmith.llm import LLMClient, LLMError
from kernelsmith.optimize.failure import failure_line
from kernelsmith.optimize.runs import run_info
from kernelsmith.report import write_run_report
from kernelsmith.task import Task

TICK_S = 1.0  # how often the live view's clocks move while searches run
MIN_LEFT_S = 1.0  # a search with less time left than this is done
OUT_OF_TIME = (
    "the budget's time ran out before its search began (the searches before it ran past their shares): "
    "run the same command again to search it"
)


@dataclass
class Search:
    name: str
    task: Task
    run_dir: Path
    seed: str | None  # None: the LLM's first version, or the start the run has stored
    cfg: EvolveConfig  # its iteration cap and time limit
    trace: Path | None = None  # where the traceback goes should it fail by no doing of the user's


@dataclass
class Searched:
    name: str
    summary: dict | None = None  # summary.json's content; None: it could not run
    failed: str | None = None  # why, in one line
    crashed: bool = False  # it failed by no doing of the user's (a worker that failed, a bug): try it again
    cut_s: float | None = None  # its time limit, where the budget's time left cut it below its own


@dataclass
class Hooks:
    """What the searches tell their caller (the live view, the work directory's state)."""

    started: Callable[[str], None] = lambda name: None
    program: Callable[[str, Event], None] = lambda name, event: None
    resumed: Callable[[str, Resumed], None] = lambda name, resumed: None
    ended: Callable[[Searched], None] = lambda done: None
    tick: Callable[[], None] = lambda: None
    started_at: dict[str, float] = field(default_factory=dict)  # name -> time.monotonic() at its start


def slots(backend: EvalBackend) -> int:
    """How many searches run at once: one per evaluation worker of the pool."""
    return max(1, int(getattr(backend, "workers", 1) or 1))


async def _one(s: Search, backend: EvalBackend, llm: LLMClient, hooks: Hooks, deadline: float | None) -> Searched:
    cfg, cut = s.cfg, None
    if deadline is not None:
        left = deadline - time.monotonic()
        if left < MIN_LEFT_S and run_info(s.run_dir).start is not None:
            return Searched(s.name, failed=OUT_OF_TIME, crashed=True)  # crashed: tried again on the next run
        left = max(left, MIN_LEFT_S)  # a start is evaluated whatever the time: a search has nothing without it
        cut = round(left, 1) if cfg.time_limit is None or left < cfg.time_limit else None
        cfg = cfg.model_copy(update={"time_limit": cut or cfg.time_limit})
    hooks.started_at[s.name] = time.monotonic()
    hooks.started(s.name)
    try:
        engine = Engine(
            s.task,
            cfg,
            s.run_dir,
            backend,
            llm,
            s.seed,
            on_program=lambda e: hooks.program(s.name, e),
            on_resume=lambda r: hooks.resumed(s.name, r),
        )
        try:
            summary = await engine.run()
        finally:
            engine.store.close()
        write_run_report(s.run_dir)
    except LLMError:
        raise  # the endpoint is down for every search alike
    except UserError as exc:
        return Searched(s.name, failed=one_line(str(exc), 400))
    except Exception as exc:  # this region's alone: the other searches and the patch go on
        return Searched(s.name, failed=failure_line("its search", exc, s.trace), crashed=True)
    return Searched(s.name, summary=summary, cut_s=cut)


async def _all(
    searches: list[Search], backend: EvalBackend, llms: list[LLMClient], hooks: Hooks, wall_s: float | None
) -> list[Searched]:
    room = asyncio.Semaphore(slots(backend))  # FIFO: the searches start in the order given
    deadline = time.monotonic() + wall_s if wall_s is not None else None

    async def run(s: Search, llm: LLMClient) -> Searched:
        async with room:
            done = await _one(s, backend, llm, hooks, deadline)
        hooks.ended(done)
        return done

    async def clock() -> None:
        while True:
            hooks.tick()
            await asyncio.sleep(TICK_S)

    ticking = asyncio.create_task(clock())
    try:
        return list(await asyncio.gather(*(run(s, llm) for s, llm in zip(searches, llms))))
    finally:
        ticking.cancel()


def run_searches(
    searches: list[Search], backend: EvalBackend, hooks: Hooks | None = None, wall_s: float | None = None
) -> list[Searched]:
    """Run every search to its end (its time, its iterations, or the tuner's last configuration), as many
    at once as `slots(backend)`, all of them within `wall_s` seconds (None: each within its own limit);
    Ctrl-C stops them all, every evaluated program stored."""
    if not searches:
        return []
    llms = open_llms(searches[0].cfg, len(searches))  # every key read before any leaves the environment
    return asyncio.run(_all(searches, backend, llms, hooks or Hooks(), wall_s))
