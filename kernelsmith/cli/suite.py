"""`kernelsmith bench` and `kernelsmith evolve-suite`: a folder of tasks, benchmarked as they are or
after a search of each; the suite's table, JSON and HTML page."""

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
    check_paths,
    console,
    eval_defaults,
    evolve_settings,
    fail,
    options_or_fail,
)
from kernelsmith.device import Device
from kernelsmith.progress import LiveProgress


def print_report(report, json_out: bool, html: Path | None = None, runs_dir: Path | None = None) -> None:
    """Print the results, then write the HTML page: a page that cannot be written loses no result.
    With `runs_dir` (evolve-suite) the page also shows each task's search."""
    from kernelsmith.suite.table import report_lines, rows_table

    if json_out:
        sys.stdout.write(report.to_json() + "\n")
    else:
        console.print(rows_table(report, note_chars=60 if console.is_terminal else None))  # a log keeps all
        for line in report_lines(report):
            console.print(line, highlight=False, soft_wrap=True)
    if html is not None:
        from kernelsmith.report import write_evolve_suite_report, write_suite_report

        if runs_dir is None:
            write_suite_report(report, html)
        else:
            write_evolve_suite_report(report, runs_dir, html)


def bench_cmd(
    suite_dir: Path = typer.Argument(..., help="a folder of task files (a KernelBench checkout, examples/suite, ...)"),
    solutions: Path = typer.Option(..., help="solutions at the same relative paths as the tasks"),
    device: Device = typer.Option(Device.cuda, help="cuda, or cpu (Triton interpreter)"),
    small: bool = typer.Option(
        False,
        "--small",
        help="cut each task to its CPU_SIZES; a task without them is a task_error, never run full size",
    ),
    workers: int | None = typer.Option(None, min=1, help="evaluation workers \\[default: one per GPU; 1 on the CPU]"),
    timeout: float = typer.Option(eval_defaults().timeout, help="wall-clock seconds per candidate"),
    build_timeout: float = typer.Option(
        eval_defaults().build_timeout, help="wall-clock seconds for a candidate's CUDA C++ builds (before --timeout)"
    ),
    eval_backend: EvalBackendKind | None = EVAL_BACKEND,
    ray_address: str | None = RAY_ADDRESS,
    eval_url: str | None = EVAL_URL,
    json_out: bool = typer.Option(False, "--json", help="print the report as one JSON object on the last line"),
    html: Path | None = typer.Option(
        None, help="also write the report as a self-contained HTML page (a directory: suite_report.html inside it)"
    ),
    quiet: bool = typer.Option(False, "--quiet", help="no progress, only the report"),
) -> None:
    """Evaluate every task's solution: correctness rate, fast_p, AMSR and geometric-mean speedup."""
    from contextlib import closing

    from kernelsmith.evaluate import EvalOptions
    from kernelsmith.evaluate.backends import backend_from_flags, open_backend
    from kernelsmith.suite.bench import NOT_EVALUATED, run_bench, scan_tasks
    from kernelsmith.task_sizes import small_source

    check_paths("dir", "suite directory", suite_dir)
    check_paths("dir", "solutions directory", solutions)
    opts = options_or_fail(EvalOptions, device=device.value, timeout=timeout, build_timeout=build_timeout)
    total = len(scan_tasks(suite_dir).tasks)  # none: an error before any evaluator starts
    backend = backend_from_flags(eval_backend.value if eval_backend else None, ray_address, eval_url)
    with closing(open_backend(backend, device.value, workers, opts)) as pool:
        if json_out or quiet:
            report = run_bench(suite_dir, solutions, pool, transform=small_source if small else None)
        else:
            with LiveProgress(console, "bench", total) as view:
                fastest: list = []

                def progress(row) -> None:
                    speed = f" {row.speedup:.3g}x" if row.speedup is not None else ""
                    # A row that was not evaluated says why (--small and no CPU_SIZES, no solution).
                    unrun = row.status in NOT_EVALUATED and row.error
                    view.say(f"{row.task}: {row.status}{speed}" + (f": {row.error}" if unrun else ""))
                    if row.success and row.speedup is not None:
                        fastest[:] = [max(fastest + [(row.speedup, row.task)])]
                    view.step(row.status, f"{fastest[0][0]:.3g}x ({fastest[0][1]})" if fastest else None)

                report = run_bench(
                    suite_dir, solutions, pool, transform=small_source if small else None, on_result=progress
                )
    print_report(report, json_out, html)


def evolve_suite_cmd(
    suite_dir: Path = typer.Argument(..., help="a folder of task files"),
    seeds: Path | None = typer.Option(
        None, help="starting candidates at the same relative paths (else the LLM translates)"
    ),
    runs_dir: Path = typer.Option(Path("runs/suite"), help="one run directory per task below it, and the report"),
    iterations: int | None = typer.Option(None, min=0, help="iterations per task \\[default: 40]"),
    mutator: Mutator = typer.Option(
        Mutator.llm, help="llm: the config's operators; tune: launch-parameter tuner only, no LLM"
    ),
    llm_base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint"),
    model: str | None = typer.Option(None, help="model name at that endpoint"),
    device: Device | None = typer.Option(None, help="cuda, or cpu (Triton interpreter) \\[default: cuda]"),
    config: Path | None = typer.Option(None, help="TOML or YAML file with every setting (flags override it)"),
    small: bool = typer.Option(
        False,
        "--small",
        help="cut each task to its CPU_SIZES (bundled suite tasks); one without them is skipped, never run full size",
    ),
    inductor_seed: bool = INDUCTOR_SEED,
    workers: int | None = typer.Option(None, min=1, help="evaluation workers \\[default: one per GPU; 1 on the CPU]"),
    eval_backend: EvalBackendKind | None = EVAL_BACKEND,
    ray_address: str | None = RAY_ADDRESS,
    eval_url: str | None = EVAL_URL,
    quiet: bool = typer.Option(False, "--quiet", help="no progress lines"),
    json_out: bool = typer.Option(False, "--json", help="print the suite report as one JSON object on the last line"),
    html: Path | None = typer.Option(
        None, help="where the HTML suite report goes \\[default: RUNS_DIR/suite_report.html]"
    ),
) -> None:
    """Search every task of SUITE_DIR with the same budget (resumable), then benchmark the best programs."""
    flags = dict(locals())  # every flag by its name, for evolve_settings
    from contextlib import closing

    from kernelsmith.evaluate.backends import open_backend
    from kernelsmith.report import write_run_report
    from kernelsmith.seed.start import inductor_start
    from kernelsmith.suite.evolve_suite import evolve_suite

    cfg = evolve_settings(flags)  # the paths checked, the config read
    try:
        with closing(open_backend(cfg.backend, cfg.evaluation.device, cfg.workers, cfg.evaluation)) as pool:

            def start(task, path, run_dir, say):  # a task with no seed: torch.compile's code, on CUDA
                return inductor_start(task, path, run_dir, mutator.value, pool, lambda text: say(escape(text)))

            derive = start if inductor_seed and cfg.evaluation.device == "cuda" and not small else None
            if quiet or json_out:
                report = evolve_suite(
                    suite_dir, seeds, runs_dir, cfg, small, pool, lambda text: None, None, write_run_report, derive
                )
            else:
                with LiveProgress(console, "suite", cfg.iterations) as view:
                    report = evolve_suite(
                        suite_dir, seeds, runs_dir, cfg, small, pool, view.say, view, write_run_report, derive
                    )
    except KeyboardInterrupt:
        fail(INTERRUPTED_SEARCH, 130)
    from kernelsmith.report.suite_report import SUITE_REPORT_NAME

    print_report(report, json_out, html or runs_dir / SUITE_REPORT_NAME, runs_dir)
