"""`kernelsmith evolve` as a function: config, LLM client, evaluation pool, engine, outputs."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape

from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import open_backend
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.config import EvolveConfig, load_config
from kernelsmith.evolve.engine import Engine, Event, Resumed, shown_status
from kernelsmith.evolve.outputs import write_summary
from kernelsmith.evolve.pace import Pace
from kernelsmith.evolve.program import Program, score_of
from kernelsmith.identity import program_hash
from kernelsmith.llm import LLMClient
from kernelsmith.progress import LiveProgress, counted
from kernelsmith.task import Task


def default_run_dir(task_path: Path) -> Path:
    return Path("runs") / task_path.stem


def _score(p: Program) -> float:
    return score_of(p.status, p.flags, p.speedup)


def progress_line(e: Event) -> str:
    """One line per stored program, in rich markup (what it holds of its own is escaped: a flag
    list in brackets would be read as a markup tag and vanish)."""
    p = e.program
    origin = p.operator + (f" of #{p.parent_id}" if p.parent_id is not None else "")
    verdict = p.status + (f" {p.speedup:.3g}x" if p.status == "correct" and p.speedup is not None else "")
    if p.flags:
        verdict += escape(f" [{', '.join(p.flags)}]")
    best = (
        f"best {e.best.speedup:.3g}x (#{e.best.id})"
        if e.best and e.best.speedup is not None
        else "no correct program yet"
    )
    mark = " [bold green]new best[/]" if e.improved else ""
    if not e.improved and e.best is not None and p.ok and _score(p) > _score(e.best):
        mark = f" (within noise of #{e.best.id})"  # faster, but not beyond both programs' timing noise
    if p.reused_from is not None:
        verdict += f", the verdict of #{p.reused_from} (the same program)"
    return (
        f"[{e.done:>3}/{e.total}] #{p.id} iteration {p.iteration} island {p.island} {origin}: {verdict}; {best}{mark}"
    )


def resume_line(r: Resumed) -> str:
    best = (
        f"best {r.best.speedup:.3g}x (#{r.best.id})"
        if r.best and r.best.speedup is not None
        else "no correct program yet"
    )
    stored = f"{r.done}/{counted(r.total, 'iteration')} stored"
    return f"resuming: {stored}, {counted(r.counts.get('correct', 0), 'correct program')}; {best}"


def _drop_key_from_environment(cfg: EvolveConfig) -> None:
    """The key is in the client now; keep it out of every process started after this one."""
    names = {cfg.llm.api_key_env} | {m.api_key_env for m in cfg.llm.models if m.api_key_env}
    for name in names:
        os.environ.pop(name, None)


def open_llms(cfg: EvolveConfig, n: int = 1) -> list[LLMClient]:
    """`n` LLM clients of `cfg` (one per search: the engine closes its own), then the key out of the
    environment; a missing key file fails here."""
    llms = [LLMClient(cfg.llm, seed=cfg.random_seed) for _ in range(n)]
    _drop_key_from_environment(cfg)
    return llms


MUTATORS = {
    "llm": None,  # the config's operator weights
    "tune": {"rewrite": 0.0, "diff": 0.0, "crossover": 0.0, "tune": 1.0},  # no LLM at all
}


def evolve_config(config_path: Path | None, overrides: dict, mutator: str = "llm") -> EvolveConfig:
    if mutator not in MUTATORS:
        raise UserError(f"--mutator {mutator}: choose one of {', '.join(MUTATORS)}")
    if MUTATORS[mutator] is not None:
        overrides = {**overrides, "operators": MUTATORS[mutator]}
    return load_config(config_path, overrides)


def best_text(e: Event | Resumed) -> str | None:
    if e.best is None or e.best.speedup is None:
        return None
    compiled = f", {e.best.speedup_vs_compile:.3g}x vs torch.compile" if e.best.speedup_vs_compile else ""
    return f"{e.best.speedup:.3g}x vs the reference{compiled} (program #{e.best.id}, iteration {e.best.iteration})"


ReportWriter = Callable[[Path], Path]  # run directory -> the report it wrote (the CLI passes report's writer)


def _outputs_on_interrupt(
    engine: Engine, task: Task, cfg: EvolveConfig, say: Callable[[str], None], write_report: ReportWriter | None
) -> None:
    """summary.json and the report of what is stored when Ctrl-C stops a run, as at its end."""
    try:
        if engine.store.get_meta("task_hash") != task.hash:
            return  # stopped before the run directory was claimed: it may hold another task's run
        hardware = engine.hardware or engine.store.get_meta("hardware") or {}
        stats = engine.tuning.stats()
        write_summary(engine.run_dir, engine.store, task, cfg, hardware, "interrupted", engine.elapsed(), tuner=stats)
        report = write_report(engine.run_dir) if write_report else None
    except (OSError, UserError, sqlite3.DatabaseError) as exc:  # the interrupt, not this, is what the user sees
        say(f"interrupted; could not write the run's summary and report: {exc}")
        return
    say(f"interrupted; summary: {engine.run_dir / 'summary.json'}" + (f"; report: {report}" if report else ""))


def check_resume(task: Task, run_dir: Path) -> None:
    """A run directory holding this task at the other size (--small or not) is an error that says
    so, before anything starts; any other task there is left to the engine's own check."""
    from kernelsmith.evolve.store import RunStore, holds_run
    from kernelsmith.task_sizes import shrink

    if not holds_run(run_dir):
        return
    try:
        store = RunStore.open_readonly(run_dir)
        try:
            stored_hash, stored = store.get_meta("task_hash"), store.get_meta("task_source")
        finally:
            store.close()
    except (UserError, sqlite3.DatabaseError):
        return  # the engine reports an unusable store
    if stored_hash is None or stored_hash == task.hash or not stored or program_hash(stored) == task.hash:
        return
    try:
        now_small, was_small = shrink(stored) == task.source, shrink(task.source) == stored
    except ValueError:
        return
    if now_small:
        raise UserError(
            f"{run_dir} holds a run of this task at full size: run without --small to resume it, "
            "or choose another --run-dir"
        )
    if was_small:
        raise UserError(
            f"{run_dir} holds a run of this task cut to its CPU_SIZES (--small): add --small to "
            "resume it, or choose another --run-dir"
        )


def run_evolve(
    task: Task,
    seed_code: str | None,
    cfg: EvolveConfig,
    run_dir: Path,
    say: Callable[[str], None],
    backend: EvalBackend | None = None,
    view: LiveProgress | None = None,
    write_report: ReportWriter | None = None,
) -> dict:
    """One search, start to end (or resumed); returns summary.json's content. `view`, when
    given, shows a live bar with ETA, the best so far and counts per status; `write_report`
    (the caller's: the search knows nothing of reports) writes the run's report at the end, and
    on Ctrl-C after summary.json."""
    check_resume(task, run_dir)
    (llm,) = open_llms(cfg)
    own_pool = backend is None
    if own_pool:
        backend = open_backend(cfg.backend, cfg.evaluation.device, cfg.workers, cfg.evaluation)
    if view is not None:
        view.reset(task.name, total=cfg.iterations)

    def on_program(e: Event) -> None:
        say(progress_line(e))
        if view is not None:
            view.step(shown_status(e.program.status, e.program.flags), best_text(e), completed=e.done)

    def on_resume(r: Resumed) -> None:
        say(resume_line(r))
        if view is not None:
            view.resume(r.done, r.counts, best_text(r))

    engine = Engine(task, cfg, run_dir, backend, llm, seed_code, on_program=on_program, on_resume=on_resume)
    try:
        say(escape(f"kernelsmith evolve: {task.name}, {counted(cfg.iterations, 'iteration')}, run directory {run_dir}"))
        summary = asyncio.run(engine.run())
    except KeyboardInterrupt:
        _outputs_on_interrupt(engine, task, cfg, say, write_report)
        raise
    finally:
        engine.store.close()
        if own_pool:
            backend.close()
    report = write_report(Path(run_dir)) if write_report else None
    best = summary["best"]
    say(
        escape(
            f"stopped: {summary['stop_reason']}; {counted(summary['iterations_done'], 'iteration')}, "
            f"{counted(summary['programs'], 'program')}, "
            f"{counted(summary['prompt_tokens'] + summary['completion_tokens'], 'token')}, ${summary['cost']:.4f}"
        )
    )
    say(escape(Pace.model_validate(summary["evaluations"]).line()))
    if best:
        speed = f"{best['speedup']:.3g}x vs the reference" if best["speedup"] is not None else "correct"
        if (
            best["speedup"] is not None and cfg.evaluation.device == "cpu"
        ):  # `make demo`'s 0.000703x, said for what it is
            speed += ": Triton's interpreter against native PyTorch on the CPU, relative only, not a GPU speedup"
        say(f"best: program {best['program_id']} ({speed}) -> {Path(run_dir) / 'best.py'}")
    else:
        say("no correct program: see the run's feedback with `kernelsmith export " + str(run_dir) + "`")
    say(f"summary: {Path(run_dir) / 'summary.json'}" + (f"; report: {report}" if report else ""))
    return summary
