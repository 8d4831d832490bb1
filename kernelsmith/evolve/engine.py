"""The search loop: propose with an LLM, evaluate, store, archive; several iterations in flight.

Iteration 0 is the starting program: the user's seed, or (without one) the LLM's first
translation of the reference. Iterations 1..N each store exactly one program row. Rerunning on
the same run directory resumes: the archive is rebuilt from the store and only the iterations
not yet stored are run, so every iteration exists exactly once whatever was killed when.

A child whose code is that of a program already stored in the run (up to formatting, comments and
docstrings, and on the CPU launch options: `kernelsmith.identity`), its parent most often, is not
evaluated again: it takes that program's verdict, its `eval` record says which (`Program.reused_from`),
and it still counts as an iteration; so does one whose code another iteration is evaluating at that
moment, once that program is stored (evolve/reuse.py). On the CPU the first success is timed again
to measure the run's noise floor before it is stored (evolve/noise_floor.py).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.errors import TaskError, UserError
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evaluate.verdict import is_success
from kernelsmith.evolve.archive import Archive, Selection
from kernelsmith.evolve.clock import SearchClock
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.descriptors import describe
from kernelsmith.evolve.edits import EditError, apply_reply
from kernelsmith.evolve.noise_floor import NoiseFloorProbe
from kernelsmith.evolve.outputs import previous_elapsed, write_best, write_summary
from kernelsmith.evolve.profiling import IslandBestProfiler
from kernelsmith.evolve.program import NO_PROGRAM, REUSED_FROM, Program, improves_on
from kernelsmith.evolve.prompts import PromptBuilder, PromptParts
from kernelsmith.evolve.reuse import VerdictReuse
from kernelsmith.evolve.start import StartFiles, tuner_start_failure, use_seed
from kernelsmith.evolve.store import RunStore
from kernelsmith.evolve.tuning import TuningMemory, annotate, hopper_or_newer, runs_in_interpreter
from kernelsmith.identity import program_hash
from kernelsmith.llm import LLMClient
from kernelsmith.progress import counted
from kernelsmith.task import Task


@dataclass
class Event:
    """What the engine tells its caller after each stored program."""

    program: Program
    best: Program | None
    improved: bool
    done: int  # iterations 1..N stored so far
    total: int


@dataclass
class Resumed:
    """What a resumed run starts from, told once before its first new iteration."""

    best: Program | None
    done: int  # iterations 1..N stored
    total: int
    counts: dict[str, int]  # stored programs per `shown_status`


def shown_status(status: str, flags) -> str:
    """A program's status as progress counts it: "flagged" for a correct one that is not a success."""
    return "flagged" if status == "correct" and not is_success(status, flags) else status


class Engine:
    def __init__(
        self,
        task: Task,
        cfg: EvolveConfig,
        run_dir: str | Path,
        backend: EvalBackend,
        llm: LLMClient | None,
        seed_code: str | None = None,
        on_program: Callable[[Event], None] | None = None,
        on_resume: Callable[[Resumed], None] | None = None,
    ):
        self.task, self.cfg, self.backend, self.llm = task, cfg, backend, llm
        self.seed_code = seed_code
        # At least one proposal per evaluation worker, so that no GPU of the pool sits idle.
        self.in_flight = max(cfg.max_in_flight, int(getattr(backend, "workers", 1) or 1))
        self.on_program = on_program or (lambda event: None)
        self.on_resume = on_resume or (lambda resumed: None)
        self.start_files = StartFiles(Path(run_dir))  # before the store exists
        self.store = RunStore(run_dir)
        self.run_dir = self.store.run_dir
        self.prompts = PromptBuilder(cfg.prompts)
        self.archive = Archive(cfg.archive)
        self.tuning = TuningMemory(named=frozenset(cfg.tuner.constexprs))
        self.reuse = VerdictReuse(self.store)  # one verdict per program (evolve/reuse.py)
        self.noise = NoiseFloorProbe(self.store, backend, task)  # a CPU run's floor, measured
        self.best: Program | None = None
        self.since_best = 0  # iterations stored after the current best
        self.stop_reason: str | None = None
        self.done = 0  # iterations 1..N stored
        self.counts: Counter[str] = Counter()  # programs stored per shown_status
        self.clock = SearchClock(cfg.time_limit)  # the search's time, over every session; the limit's stop
        self.hardware: dict = {}
        self.profiler = IslandBestProfiler(
            cfg.profile, cfg.evaluation.device, backend, task, self.store, self.clock.started
        )

    # ---- setting up and resuming
    def _claim_run_dir(self) -> None:
        stored = self.store.get_meta("task_hash")
        source = self.store.get_meta("task_source")
        if stored is not None and stored != self.task.hash and source and program_hash(source) == self.task.hash:
            self.store.set_meta("task_hash", self.task.hash)  # a store of a version that hashed the raw text
            stored = self.task.hash
        if stored is not None and stored != self.task.hash:
            name = self.store.get_meta("task_name")
            raise UserError(f"{self.run_dir} holds a run of another task ({name}); choose another --run-dir")
        if stored is None:
            self.store.set_meta("task_hash", self.task.hash)
            self.store.set_meta("task_name", self.task.name)
            self.store.set_meta("task_source", self.task.source)
            self.store.set_meta("created_at", time.time())
        self.store.set_meta("config", self.cfg.model_dump(mode="json"))

    def _rebuild(self) -> None:
        """Replay the stored programs into the archive, in the order they were stored."""
        self.best = self.store.best()  # best_of: the rule the search applied as it stored them
        for row in self.store.archive_rows():
            ok = is_success(row.status, row.flags)
            self.counts[shown_status(row.status, row.flags)] += 1
            self._admit(row.id, row.iteration, row.island, row.has_code, row.score, ok, row.descriptors)
            self.profiler.seen(row.island, row.score, ok)
            self.tuning.record(row.skeleton, row.config, row.score, row.id, ok)
            if row.iteration > 0:
                self.since_best += 1
                self.done += 1
            if self.best is not None and row.id == self.best.id:
                self.since_best = 0

    def _admit(self, pid, iteration, island, has_code, score, ok, descriptors) -> None:
        self.archive.admit(self.archive.entry(pid, score, ok, descriptors) if has_code else None, iteration, island)

    # ---- one iteration
    def _operator(self, sel: Selection, rng: random.Random) -> str:
        w = self.cfg.operators
        if not w.uses_llm:
            return "tune"
        if sel.parent_id is None:
            return "translate"
        if not sel.parent_ok:
            return "repair"
        ops = [
            ("rewrite", w.rewrite),
            ("diff", w.diff),
            ("crossover", w.crossover if sel.inspiration_ids else 0.0),
            ("tune", w.tune),
        ]
        ops = [(o, x) for o, x in ops if x > 0] or [("rewrite", 1.0)]
        return rng.choices([o for o, _ in ops], weights=[x for _, x in ops])[0]

    async def _evaluate(self, program: Program) -> Program:
        code = program.code
        if code is None:
            raise ValueError("only a program with code is evaluated")
        # The same program again: a second timing would only add noise, and give it two speedups.
        reused = await self.reuse.verdict(code, program.iteration)
        if reused is not None:
            twin, verdict = reused
            program.with_verdict(verdict)
            program.eval = {**(program.eval or {}), REUSED_FROM: twin}
        else:
            try:
                result = await asyncio.wrap_future(self.backend.submit(self.task, code))
            except TaskError as exc:
                raise UserError(str(exc)) from None
            program.with_verdict(result)
        program.descriptors = describe(code, program.eval, self.cfg.archive.features)
        annotate(program, self.tuning.hopper, self.tuning.interpreted, self.tuning.named)
        return program

    async def _tune(self, iteration: int, island: int, sel: Selection, rng: random.Random) -> Program:
        """A launch-parameter variant of the parent; when the tuner has tried everything around it,
        of the next best correct programs of the island, the whole archive, then of every family's best."""
        order = [sel.parent_id] if sel.parent_id is not None and sel.parent_ok else []
        order += self.archive.islands[island].best_ok.ids() + self.archive.best_ids(50) + self.tuning.leader_ids()
        for pid in dict.fromkeys(order):
            parent = self.store.get(pid)
            proposal = self.tuning.propose(parent, rng)
            if proposal is None:
                continue
            code, config = proposal
            program = Program(
                iteration=iteration,
                island=island,
                operator="tune",
                code=code,
                status=NO_PROGRAM,
                parent_id=parent.id,
                response=None,
            )
            try:
                return await self._evaluate(program)
            finally:
                self.tuning.release(parent.skeleton, config)
        self.stop_reason = self.stop_reason or self.tuning.exhausted()
        return Program(
            iteration=iteration,
            island=island,
            operator="tune",
            code=None,
            status=NO_PROGRAM,
            parent_id=sel.parent_id,
            error="the tuner has no untried launch configuration left",
        )

    async def _propose(self, iteration: int, island: int, rng: random.Random) -> Program:
        sel = self.archive.select(island, rng)
        op = self._operator(sel, rng)
        if op == "tune":
            return await self._tune(iteration, island, sel, rng)
        parent = self.store.get(sel.parent_id) if sel.parent_id is not None else None
        tops = self.store.get_many(sel.top_ids)
        diverse = self.store.get_many(sel.diverse_ids)
        second = None
        if op == "crossover":
            second = (tops + diverse)[0]
            tops = [p for p in tops if p.id != second.id]
            diverse = [p for p in diverse if p.id != second.id]
        history = self.store.recent(self.cfg.prompts.history, island) if self.cfg.prompts.history else []
        messages = self.prompts.messages(
            PromptParts(
                operator=op,
                task_name=self.task.name,
                task_code=self.task.source,
                hardware=self.hardware,
                parent=parent,
                second=second,
                top=tops,
                inspirations=diverse,
                history=history,
            )
        )
        if self.llm is None:
            raise UserError("this search has no LLM (the tuner alone), yet an LLM operator was chosen")
        model = self.llm.pick_model(rng)
        reply = await self.llm.complete(messages, model)
        program = Program(
            iteration=iteration,
            island=island,
            operator=op,
            code=None,
            status=NO_PROGRAM,
            parent_id=sel.parent_id,
            inspiration_ids=sel.inspiration_ids,
            model=reply.model,
            messages=messages,
            response=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost=reply.cost,
            latency_s=reply.latency_s,
        )
        try:
            program.code = apply_reply(
                parent.code if parent else None, reply.text, "diff" if op == "diff" else "rewrite"
            )
        except EditError as exc:
            program.error = str(exc)
            return program
        return await self._evaluate(program)

    async def _iteration(self, iteration: int) -> Program:
        began, rng = time.monotonic(), random.Random(f"{self.cfg.random_seed}:{iteration}")
        island = 0 if iteration == 0 else (iteration - 1) % self.cfg.archive.islands
        try:
            if iteration == 0 and self.seed_code is not None:
                program = await self._evaluate(
                    Program(iteration=0, island=0, operator="seed", code=self.seed_code, status=NO_PROGRAM)
                )
            else:
                program = await self._propose(iteration, island, rng)
            await self.noise.settle(program, first_success=self.best is None)  # before the first success
            self.clock.ended(iteration, time.monotonic() - began)
            return self._record(program)
        finally:
            self.reuse.release(iteration)

    def _record(self, p: Program) -> Program:
        self.store.add(p)
        self.store.set_meta("elapsed_s", round(self.elapsed(), 2))  # a killed session's time is kept too
        self.counts[shown_status(p.status, p.flags)] += 1
        if p.code is not None and p.id is not None:
            self.reuse.add(p.code, p.id)
        self._admit(p.id, p.iteration, p.island, p.code is not None, p.score, p.ok, p.descriptors)
        self.tuning.record(p.skeleton, p.config, p.score, p.id, p.ok)
        self.profiler.consider(p)
        improved = improves_on(p, self.best, self.noise.floors)  # beyond both programs' noise (best_of's rule)
        if p.iteration > 0:
            self.since_best += 1
            self.done += 1
        if improved:
            self.best, self.since_best = p, 0
            write_best(self.run_dir, p, self.task)
        self.on_program(Event(p, self.best, improved, self.done, self.cfg.iterations))
        return p

    # ---- the loop
    def _budget_stop(self) -> str | None:
        c = self.cfg
        totals = self.store.totals()
        if c.max_cost is not None and totals["cost"] >= c.max_cost:
            return f"cost budget reached (${totals['cost']:.4f} of ${c.max_cost:g})"
        tokens = totals["prompt_tokens"] + totals["completion_tokens"]
        if c.max_tokens is not None and tokens >= c.max_tokens:
            return f"token budget reached ({tokens} of {c.max_tokens})"
        if c.early_stop is not None and self.since_best >= c.early_stop:
            return f"no improvement in {counted(self.since_best, 'iteration')}"
        return self.clock.stop()

    async def run(self) -> dict:
        self._claim_run_dir()
        try:
            return await self._run()
        except Exception:
            # A run that failed before its first iteration leaves no run directory for `runs` to list.
            self.start_files.discard(self.store)
            raise

    def elapsed(self) -> float:  # seconds the search has run, over every session of it (a resume adds its own)
        return self.clock.elapsed()

    async def _run(self) -> dict:
        if self.seed_code is not None:
            use_seed(self.store, self.seed_code)  # a failed start is fixed by fixing the seed file
        self.clock.before = previous_elapsed(self.store)
        self._rebuild()
        stored = self.store.iterations()
        if stored:
            self.on_resume(Resumed(self.best, self.done, self.cfg.iterations, dict(self.counts)))
        todo = deque(i for i in range(1, self.cfg.iterations + 1) if i not in stored)
        if 0 not in stored and self.seed_code is None and not self.cfg.operators.uses_llm:
            raise UserError("the tuner alone needs a starting program: give --seed")
        needs_llm = (bool(todo) and self.cfg.operators.uses_llm) or (0 not in stored and self.seed_code is None)
        try:  # the LLM client is closed however this ends (a failed preflight too)
            if needs_llm:
                if self.llm is None:
                    raise UserError("this run needs an LLM: give --llm-base-url and --model, or a config with [llm]")
                await self.llm.check()
            if needs_llm or 0 not in stored or self.store.get_meta("hardware") is None:
                self.hardware = await asyncio.wrap_future(self.backend.hardware())
                self.store.set_meta("hardware", self.hardware)
            else:  # nothing left to run: do not start a judge only to ask
                self.hardware = self.store.get_meta("hardware") or {}
            self.tuning.hopper = hopper_or_newer(self.hardware)
            self.tuning.interpreted = runs_in_interpreter(self.hardware)  # launch options count for nothing
            self.reuse.load(self.tuning.interpreted)
            if 0 not in stored:
                await self._iteration(0)
            if todo and not self.cfg.operators.uses_llm and self.best is None:
                raise UserError(tuner_start_failure(self.store.at_iteration(0), self.task, self.tuning.interpreted))
            await self._loop(todo)
            await self.profiler.drain()
        finally:
            if self.llm is not None:
                await self.llm.close()
        self.stop_reason = self.stop_reason or ("done" if not todo else "stopped")
        return write_summary(
            self.run_dir,
            self.store,
            self.task,
            self.cfg,
            self.hardware,
            self.stop_reason,
            self.elapsed(),
            profiling=self.profiler.stats(),
            tuner=self.tuning.stats(),
        )

    async def _loop(self, todo: deque) -> None:
        running: set[asyncio.Task] = set()
        try:
            while todo or running:
                while todo and len(running) < self.in_flight and self.stop_reason is None:
                    self.stop_reason = self._budget_stop()
                    if self.stop_reason is None:
                        running.add(asyncio.create_task(self._iteration(todo.popleft())))
                if not running:
                    break
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    t.result()  # an LLM outage or a bug ends the run; stored programs stay
        finally:
            for t in running:
                t.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
