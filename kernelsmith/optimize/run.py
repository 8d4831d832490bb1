"""`kernelsmith optimize` as a function: capture the model, give each region worth searching a start, search
them on one evaluation pool within the budget, write the patch and check it, and say what came of it.

Each step leaves its state in the work directory (workdir.py) as it ends, so the same call resumes a
killed one without doing a finished step again, and a larger budget goes on with the searches.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch

from kernelsmith.apply.patch_dir import read_capture
from kernelsmith.capture.run import MANIFEST, capture
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import backend_overrides, open_backend
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.config import EvolveConfig, read_config_file
from kernelsmith.evolve.run import evolve_config
from kernelsmith.identity import program_hash
from kernelsmith.optimize.board import Board, Row
from kernelsmith.optimize.budget import shown_time, split_budget, time_left
from kernelsmith.optimize.failure import failure_line
from kernelsmith.optimize.options import OptimizeOptions
from kernelsmith.optimize.outcome import summarize
from kernelsmith.optimize.page import write_page
from kernelsmith.optimize.patching import make_patch, patch_key
from kernelsmith.optimize.plan import Region, plan
from kernelsmith.optimize.result import Optimized, PatchOutcome
from kernelsmith.optimize.runs import RunInfo, run_info
from kernelsmith.optimize.search import MIN_LEFT_S, Search, Searched, run_searches, slots
from kernelsmith.optimize.starts import Seeder, Start, find_start, seeder, start_advice, unmatched
from kernelsmith.optimize.workdir import RegionState, State, WorkDir
from kernelsmith.progress import LiveProgress, counted
from kernelsmith.task_sizes import load_task

Say = Callable[[str], None]
PATCH_PARTIAL = "patch.partial"  # where the patch is made and checked before it is moved in place
MAX_ITERATIONS = 10_000  # a search's iterations when --iterations does not cap them: its time does
# How a finished search's stop reason begins when more time or iterations would let it go on.
GOES_ON = ("time limit", "done", "stopped", "interrupted")


class _Pool:
    """The evaluation pool, opened when something needs it (a resumed run whose steps are all done opens
    none)."""

    def __init__(self, cfg: EvolveConfig):
        self.cfg, self.backend = cfg, None

    def get(self) -> EvalBackend:
        if self.backend is None:
            c = self.cfg
            self.backend = open_backend(c.backend, c.evaluation.device, c.workers, c.evaluation)
        return self.backend

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def _config(opts: OptimizeOptions) -> EvolveConfig:
    """Every search's config: the --config file, the flags over it; the tuner without an LLM."""
    listed = opts.config is not None and bool((read_config_file(opts.config).get("llm") or {}).get("models"))
    if opts.llm_base_url is not None and opts.model is None and not listed:
        raise UserError(
            "--llm-base-url needs --model (the model's name at that endpoint), or a --config whose [llm] lists models"
        )
    overrides: dict = {"evaluation": {"device": opts.device}}
    if opts.workers is not None:
        overrides["workers"] = opts.workers
    backend = backend_overrides(opts.eval_backend, opts.ray_address, opts.eval_url)
    if backend:
        overrides["backend"] = backend
    if opts.llm_base_url is not None:
        overrides.setdefault("llm", {})["base_url"] = opts.llm_base_url
    if opts.model is not None:
        overrides.setdefault("llm", {})["models"] = [{"name": opts.model}]
    llm = opts.model is not None or listed
    cfg = evolve_config(opts.config, overrides, "llm" if llm else "tune")
    # The tuner waits for no LLM: two proposals at a time, one judged and the next queued behind it, which
    # its judge loads ahead (evaluate/judging/ahead.py: its kernels compile beside the first's trials); the
    # time limit is passed by one evaluation at most.
    return cfg if llm else cfg.model_copy(update={"max_in_flight": 2})


def _check(opts: OptimizeOptions) -> None:
    if opts.device == "cuda" and not torch.cuda.is_available():
        raise UserError(NO_CUDA_GPU)
    if "graphs" in opts.checked_modes and opts.device != "cuda":
        raise UserError("--mode graphs replays CUDA graphs: it needs --device cuda")
    if opts.seeds is not None and not Path(opts.seeds).is_dir() and ":" not in opts.seeds:
        raise UserError(f"--seeds {opts.seeds}: no such folder (give a folder of seeds, or file.py:function)")


def _captured(wd: WorkDir, state: State, opts: OptimizeOptions, say: Say) -> dict:
    """The capture's manifest: made once (in a folder of its own, moved in place whole)."""
    if state.captured and (wd.capture / MANIFEST).is_file():
        say(f"capture: done earlier, in {wd.capture}")
        return read_capture(wd.capture)
    partial = wd.out / "capture.partial"
    for stale in (partial, wd.capture):
        shutil.rmtree(stale, ignore_errors=True)
    t0 = time.monotonic()
    done = capture(opts.entry, partial, opts.device, None, opts.min_share, opts.forwards, opts.shapes, opts.fused)
    manifest = json.loads((partial / MANIFEST).read_text(encoding="utf-8"))
    manifest["out_dir"] = str(wd.capture)  # where it is, not where it was made
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, wd.capture)
    state.captured, state.capture_s = True, time.monotonic() - t0
    wd.save(state)
    written = sum(1 for t in done.tasks if t.file)
    say(f"capture: {counted(written, 'task')} in {wd.capture} ({shown_time(state.capture_s)})")
    return read_capture(wd.capture)


def _closed(rs: RegionState, info: RunInfo, cap: int) -> bool:
    """A search that more time would not move: its iterations all done, or it ended for a reason of its own
    (the tuner's last configuration, no improvement)."""
    if info.exists and info.iterations >= cap:
        return True
    return rs.finished and bool(rs.stop_reason) and not str(rs.stop_reason).startswith(GOES_ON)


def _starts(
    wd: WorkDir,
    state: State,
    todo: list[Region],
    opts: OptimizeOptions,
    given: Seeder | None,
    llm: bool,
    pool: _Pool,
    say: Say,
) -> dict[str, Start]:
    """The start of each region still to search; a region without one says why, in its state."""
    found, none = {}, []
    for r in todo:
        rs = state.regions.setdefault(r.name, RegionState())
        path = wd.capture / (r.file or "")
        task = load_task(path, opts.small)
        crashed = False
        try:
            got = find_start(
                task, path, wd.run_dir(r.name), wd.seeds, given, llm, pool.get if opts.device == "cuda" else None
            )
        except UserError:
            raise
        except Exception as exc:  # deriving or judging this region's seed: the other regions go on
            got, crashed = failure_line("its start", exc, wd.failure(r.name)), True
        if isinstance(got, str):
            rs.seed_origin, rs.failed, rs.crashed = None, got, crashed
            say(f"{r.name}: {got}")
            none += [] if crashed else [r.name]
            continue
        if got.note:
            say(f"{r.name}: {got.note}")
        rs.seed_origin = got.origin
        if rs.failed_start is not None and got.code is not None and program_hash(got.code) == rs.failed_start:
            say(f"{r.name}: {rs.failed} (the same start as before: give another)")
            continue
        rs.failed, rs.failed_start, rs.crashed = None, None, False
        found[r.name] = got
    if none:
        say(start_advice(none, opts.device))
    wd.save(state)
    return found


def _under_way(wd: WorkDir, state: State) -> Callable[[str], None]:
    """A search that starts has not finished (until it ends: a kill leaves it so)."""

    def started(name: str) -> None:
        state.regions.setdefault(name, RegionState()).finished = False
        wd.save(state)

    return started


def _record(wd: WorkDir, state: State, starts: dict[str, Start]) -> Callable[[Searched], None]:
    """What a search's end leaves in the state (so a resumed run does not search it again)."""

    def ended(done: Searched) -> None:
        rs = state.regions.setdefault(done.name, RegionState())
        if done.failed is not None:
            code = starts[done.name].code
            rs.failed, rs.crashed = done.failed, done.crashed
            # A start the search could not go on from is not tried again; one whose search crashed is.
            rs.failed_start = program_hash(code) if code is not None and not done.crashed else None
        else:
            rs.finished, rs.stop_reason, rs.failed = True, (done.summary or {}).get("stop_reason"), None
            rs.crashed = False
        wd.save(state)

    return ended


def _search(
    wd: WorkDir, state: State, regions: list[Region], opts: OptimizeOptions, cfg: EvolveConfig, given, say: Say, view
) -> tuple[dict[str, RunInfo], int, float]:
    """Search every region that has a start and time left. (each region's run, searches at once, seconds)."""
    pool = _Pool(cfg)
    try:
        cap = opts.iterations if opts.iterations is not None else MAX_ITERATIONS
        chosen = [r for r in regions if r.searched]
        infos = {r.name: run_info(wd.run_dir(r.name)) for r in chosen}
        state_of = lambda r: state.regions.setdefault(r.name, RegionState())
        closed = {r.name for r in chosen if _closed(state_of(r), infos[r.name], cap)}
        # No allotment is above the budget: a search that has spent it is done, whatever the split.
        spent = lambda r: infos[r.name].exists and infos[r.name].elapsed_s + MIN_LEFT_S >= opts.budget_s
        may_run = [r for r in chosen if r.name not in closed and not spent(r)]
        starts = _starts(wd, state, may_run, opts, given, cfg.operators.uses_llm, pool, say)
        held = [r for r in chosen if r.name in starts or r.name in closed or (infos[r.name].exists and spent(r))]
        width = slots(pool.get()) if starts else state.slots
        allot = split_budget({r.name: r.share for r in held}, opts.budget_s, width)
        searches, rows = [], []
        for r in held:
            state_of(r).allotment_s = allot[r.name]
            left = time_left(allot[r.name], infos[r.name].elapsed_s)
            ready = r.name in starts and (left >= MIN_LEFT_S or not infos[r.name].exists)
            if ready:
                limits = {"iterations": cap, "time_limit": round(max(left, MIN_LEFT_S), 1)}
                task = load_task(wd.capture / (r.file or ""), opts.small)
                searches.append(
                    Search(
                        r.name,
                        task,
                        wd.run_dir(r.name),
                        starts[r.name].code,
                        cfg.model_copy(update=limits),
                        trace=wd.failure(r.name),
                    )
                )
            rows.append(Row.of(r.name, allot[r.name], infos[r.name], ready, r.of_floor))
        state.slots = width
        wd.save(state)
        _say_split(say, held, allot, opts.budget_s, width)
        t0 = time.monotonic()
        if searches:
            board = Board(rows, width, say, view)
            board.on_start, board.on_end = _under_way(wd, state), _record(wd, state, starts)
            limits = [s.cfg.time_limit or 0.0 for s in searches]  # the budget's wall time left to them all
            run_searches(searches, pool.get(), board.hooks, max(max(limits), sum(limits) / width))
        return {r.name: run_info(wd.run_dir(r.name)) for r in chosen}, width, time.monotonic() - t0
    finally:
        pool.close()


def _say_split(say: Say, held: list[Region], allot: dict[str, float], budget_s: float, width: int) -> None:
    if not held:
        return
    each = ", ".join(f"{r.name} {shown_time(allot[r.name])} ({r.share:.1%})" for r in held)
    at_once = f", {width} at once" if width > 1 else ""
    say(f"budget {shown_time(budget_s)} by share of the forward{at_once}: {each}")


def _patch(wd: WorkDir, state: State, regions: list[Region], opts: OptimizeOptions, device: str, say: Say):
    """The patch of every region's best kernel, checked in the chosen modes (not made again when its kernels
    and modes are those of the stored one)."""
    runs = {r.name: wd.run_dir(r.name) for r in regions if r.searched and run_info(wd.run_dir(r.name)).exists}
    if not runs:
        return None
    min_speedup = opts.min_speedup if opts.min_speedup is not None else (0.0 if device == "cpu" else 1.0)
    settings = {"device": device, "reps": opts.reps, "min_speedup": min_speedup, "accept_slower": opts.accept_slower}
    key = patch_key(runs, opts.checked_modes, settings)
    if (
        state.patch is not None
        and state.patch.key == key
        and (state.patch.path is None or Path(state.patch.path).is_dir())
    ):
        say("patch: done earlier, of the same kernels and modes")
        return state.patch
    out = wd.patch_dir(opts.entry)
    modes = ", ".join(opts.checked_modes)
    best = "the best kernel of 1 search" if len(runs) == 1 else f"the best kernels of {len(runs)} searches"
    say(f"patch: {best} into {out}, checked in {modes}")
    # Made and checked in a folder of its own, moved in place whole once checked (as the capture is): a kill
    # during the check leaves the earlier patch and its page as they were, never an unchecked patch behind a
    # page that says "passed" (issue 55). The package keeps its name: PARTIAL/<name>.
    partial = wd.out / PATCH_PARTIAL / out.name
    shutil.rmtree(partial.parent, ignore_errors=True)
    patch: PatchOutcome = make_patch(
        runs, wd.capture, partial, device, opts.checked_modes, opts.reps, min_speedup, opts.accept_slower, key
    )
    if patch.path is not None:
        patch.path = str(_moved_whole(partial, out))
    elif (out / "patch.json").is_file():
        shutil.rmtree(out)  # an earlier patch of other kernels: not this run's
    shutil.rmtree(partial.parent, ignore_errors=True)
    state.patch = patch
    wd.save(state)
    return patch


def _moved_whole(partial: Path, out: Path) -> Path:
    """The checked patch in `out`, in place of an earlier one, by renames (no moment without either whole);
    its apply.json names where it now is."""
    record = partial / "apply.json"
    if record.is_file():
        applied = json.loads(record.read_text(encoding="utf-8"))
        applied["out_dir"] = str(out)
        record.write_text(json.dumps(applied, indent=1) + "\n", encoding="utf-8")
    replaced = partial.parent / "replaced"
    if out.exists():
        os.replace(out, replaced)
    os.replace(partial, out)
    shutil.rmtree(replaced, ignore_errors=True)
    return out


def optimize(opts: OptimizeOptions, say: Say = print, view: LiveProgress | None = None) -> Optimized:
    """The whole of `kernelsmith optimize`; `view` shows the searches live. Resumes the work directory."""
    _check(opts)
    cfg = _config(opts)
    given = seeder(opts.seeds)  # a bad --seeds is said before the capture's work
    wd = WorkDir(opts.out)
    fresh = not wd.out.exists()
    state = wd.open(opts.bound())
    if opts.device == "cpu":  # Triton kernels run on the CPU in its interpreter (read when triton is imported)
        os.environ["TRITON_INTERPRET"] = "1"
    wd.save(state)
    try:
        manifest = _captured(wd, state, opts, say)
    except UserError:
        if fresh:  # a run that made nothing leaves no folder
            shutil.rmtree(wd.out, ignore_errors=True)
        raise
    regions = plan(manifest, opts.top)
    stray = unmatched(opts.seeds, {r.name: r.why for r in regions})
    if stray:
        say(stray)
    infos, width, search_s = _search(wd, state, regions, opts, cfg, given, say, view)
    patch = _patch(wd, state, regions, opts, manifest.get("device", opts.device), say)
    result = summarize(manifest, regions, state.regions, infos, wd, patch, opts.budget_s)
    result.slots, result.search_s, result.capture_s = width, search_s, state.capture_s
    result.report = str(write_page(wd.report, result))
    state.result = result
    wd.save(state)
    return result
