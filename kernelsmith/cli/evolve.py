"""`kernelsmith evolve`: one task's search, with an LLM or the tuner, stored in its run directory."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from kernelsmith.cli.common import (
    EVAL_BACKEND,
    EVAL_URL,
    INDUCTOR_SEED,
    INTERRUPTED_SEARCH,
    RAY_ADDRESS,
    EvalBackendKind,
    Mutator,
    console,
    evolve_settings,
    fail,
    note_full_size,
)
from kernelsmith.device import Device
from kernelsmith.progress import LiveProgress


def _search(t, task: Path, seed_code: str | None, cfg, run_dir: Path, mutator: str, derive: bool, quiet: bool) -> dict:
    """Run the search (a fresh run on CUDA with no seed and `derive` starts from torch.compile's code);
    `quiet`: no progress lines. The run's summary."""
    from contextlib import ExitStack, closing

    from kernelsmith.evaluate.backends import open_backend
    from kernelsmith.evolve.run import run_evolve
    from kernelsmith.evolve.store import holds_run
    from kernelsmith.report import write_run_report
    from kernelsmith.seed.start import inductor_start

    with ExitStack() as stack:
        backend = None
        say = (lambda text: None) if quiet else (lambda text: console.print(escape(text)))
        fresh = not holds_run(run_dir)  # a resumed run keeps its stored start: no pool for it
        if seed_code is None and derive and cfg.evaluation.device == "cuda" and fresh:
            backend = stack.enter_context(
                closing(open_backend(cfg.backend, cfg.evaluation.device, cfg.workers, cfg.evaluation))
            )
            seed_code = inductor_start(t, task, run_dir, mutator, backend, say)
        if quiet:
            return run_evolve(t, seed_code, cfg, run_dir, say, backend, write_report=write_run_report)
        with LiveProgress(console, t.name, cfg.iterations) as view:
            return run_evolve(t, seed_code, cfg, run_dir, view.say, backend, view=view, write_report=write_run_report)


def evolve_cmd(
    task: Path = typer.Argument(..., help="KernelBench-format task file"),
    seed: Path | None = typer.Option(
        None, help="starting candidate (ModelNew); without it the LLM translates the reference first"
    ),
    llm_base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"),
    model: str | None = typer.Option(None, help="model name at that endpoint (a config can list an ensemble)"),
    iterations: int | None = typer.Option(
        None, min=0, help="iterations in total, the start not counted \\[default: 40]"
    ),
    run_dir: Path | None = typer.Option(
        None, help="where the run lives \\[default: runs/TASK]; an existing run there resumes"
    ),
    device: Device | None = typer.Option(None, help="cuda, or cpu (Triton interpreter) \\[default: cuda]"),
    config: Path | None = typer.Option(None, help="TOML or YAML file with every setting (flags override it)"),
    max_cost: float | None = typer.Option(None, help="stop proposing once the run has cost this many USD"),
    max_tokens: int | None = typer.Option(None, help="stop proposing after this many tokens in total"),
    time_limit: float | None = typer.Option(None, help="stop proposing after this many seconds"),
    early_stop: int | None = typer.Option(None, help="stop after this many iterations without a new best"),
    workers: int | None = typer.Option(None, min=1, help="evaluation workers \\[default: one per GPU; 1 on the CPU]"),
    mutator: Mutator = typer.Option(
        Mutator.llm, help="llm: the config's operators; tune: launch-parameter tuner only, no LLM"
    ),
    small: bool = typer.Option(False, "--small", help="cut the task to its CPU_SIZES (bundled suite tasks)"),
    inductor_seed: bool = INDUCTOR_SEED,
    eval_backend: EvalBackendKind | None = EVAL_BACKEND,
    ray_address: str | None = RAY_ADDRESS,
    eval_url: str | None = EVAL_URL,
    quiet: bool = typer.Option(False, "--quiet", help="no progress lines: only where best.py and the summary went"),
    json_out: bool = typer.Option(False, "--json", help="print summary.json's content on the last line"),
) -> None:
    """Evolve a fast Triton kernel for TASK with an LLM or the tuner; every program goes into RUN_DIR."""
    flags = dict(locals())  # every flag by its name, for evolve_settings
    from kernelsmith.candidate import Candidate
    from kernelsmith.evolve.run import check_resume, default_run_dir
    from kernelsmith.task_sizes import load_task

    cfg = evolve_settings(flags)  # the paths checked, the config read
    t = load_task(task, small)
    seed_code = Candidate.from_file(seed).source if seed else None
    run_dir = run_dir or default_run_dir(task)
    check_resume(t, run_dir)  # a run of the task at the other size: that error alone, not the note first
    note_full_size(t, task, cfg.evaluation.device)
    try:
        summary = _search(
            t, task, seed_code, cfg, run_dir, mutator.value, inductor_seed and not small, quiet or json_out
        )
        if quiet and not json_out:  # no progress, but where the results went
            where = f"best: {run_dir / 'best.py'}" if summary.get("best") else "no correct program"
            console.print(escape(f"{where}; summary: {run_dir / 'summary.json'}"), highlight=False, soft_wrap=True)
    except KeyboardInterrupt:
        fail(INTERRUPTED_SEARCH, 130)
    if json_out:
        import json

        sys.stdout.write(json.dumps(summary) + "\n")
