"""The `kernelsmith` command. Thin: parse, call the packages, print."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from kernelsmith.cli_console import stdout_console
from kernelsmith.cli_errors import check_paths, fail, print_error
from kernelsmith.cli_flags import EVAL_BACKEND, EVAL_URL, RAY_ADDRESS, EvalBackendKind
from kernelsmith.device import NO_CUDA_GPU, Device
from kernelsmith.errors import UserError
from kernelsmith.progress import LiveProgress

# -h as well as --help; every subcommand inherits it from this context.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Evolve fast, verified GPU kernels for PyTorch operators.",
)
console = stdout_console()


def _print_version(value: bool) -> None:
    if value:
        from kernelsmith import __version__

        print(f"kernelsmith {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",  # a flag: typer would show "<bool>", as if it took a value
        help="print the version and exit",
    ),
) -> None:
    """Evolve fast, verified GPU kernels for PyTorch operators."""


# evolve and evolve-suite: a task without a seed starts from torch.compile's code on CUDA (kernelsmith seed)
INDUCTOR_SEED = typer.Option(
    True,
    "--inductor-seed/--no-inductor-seed",
    help="on CUDA, a task without a seed starts from torch.compile's own code (kernelsmith seed) when it is "
    "a success (and, for the LLM, faster than the reference)",
)


class Mutator(str, Enum):
    """An Enum, not a str, so that --help lists the choices (evolve.run.MUTATORS)."""

    llm = "llm"
    tune = "tune"


def _defaults():
    from kernelsmith.evaluate.options import EvalOptions

    return EvalOptions()


def options_or_fail(model, **values):
    """Build a pydantic options model; a bad value is one line and exit 2, not a traceback."""
    from pydantic import ValidationError

    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "--" + str(first["loc"][0]).replace("_", "-") if first.get("loc") else "option"
        raise UserError(f"bad value for {name}: {first['msg']}") from None


def print_result(result, task_name: str, candidate_name: str, profiled: bool = False) -> None:
    from kernelsmith.cli_verdict import verdict_table

    console.print(verdict_table(result, task_name, candidate_name, profiled))
    if result.error:
        console.print("error:\n" + result.error, highlight=False, markup=False)


@app.command("eval")
def eval_cmd(
    task: Path = typer.Argument(..., help="KernelBench-format task file (Model, get_inputs, get_init_inputs)"),
    candidate: Path = typer.Argument(..., help="candidate file defining ModelNew"),
    device: Device = typer.Option(Device.cuda, help="cuda, or cpu (Triton interpreter)"),
    small: bool = typer.Option(False, "--small", help="cut the task to its CPU_SIZES (bundled suite tasks)"),
    json_out: bool = typer.Option(False, "--json", help="print the verdict as one JSON object on the last line"),
    timeout: float = typer.Option(_defaults().timeout, help="wall-clock seconds for the candidate"),
    build_timeout: float = typer.Option(
        _defaults().build_timeout, help="wall-clock seconds for its CUDA C++ builds (before --timeout starts)"
    ),
    memory_limit: str = typer.Option("8G", help="host memory limit for the candidate, e.g. 3G"),
    trials: int = typer.Option(_defaults().trials, min=1, help="correctness trials, each on fresh random inputs"),
    compile_baseline: bool | None = typer.Option(
        None, help="also time torch.compile of the reference \\[default: on for cuda, off for cpu]"
    ),
    cache: bool = typer.Option(True, help="reuse cached reference / torch.compile timings"),
    profile: bool = typer.Option(
        False, help="after the verdict, Nsight Compute's counters of the heaviest kernels (CUDA, where ncu runs)"
    ),
    profile_timeout: float = typer.Option(120.0, min=1, help="wall-clock seconds for --profile's stage"),
    torch_ops: str = typer.Option(
        _defaults().torch_ops,
        help="partial: library ops may do part of the work "
        "(KernelBench's rule); none: any library compute in forward fails",
    ),
) -> None:
    """Compile, check and time CANDIDATE against TASK; print the verdict."""
    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate import EvalOptions, evaluate
    from kernelsmith.task_sizes import load_task

    try:
        check_paths("file", "task file", task)
        check_paths("file", "candidate file", candidate)
        t = load_task(task, small)  # as evolve and bench read it
        c = Candidate.from_file(candidate)
        opts = options_or_fail(
            EvalOptions,
            device=device.value,
            timeout=timeout,
            build_timeout=build_timeout,
            memory_limit=memory_limit,
            trials=trials,
            compile_baseline=compile_baseline,
            use_baseline_cache=cache,
            torch_ops=torch_ops,
        )
        result = evaluate(t, c, opts, profile_timeout=profile_timeout if profile else None)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    if json_out:
        from kernelsmith.cli_verdict import verdict_record

        sys.stdout.write(verdict_record(result) + "\n")
    else:
        print_result(result, t.name, c.name, profiled=profile)


def _evolve_overrides(
    llm_base_url: str | None, model: str | None, device: Device | None, backend: tuple = (None, None, None), **simple
) -> dict:
    """The config fields the flags set (a flag left out leaves the config file's value).
    `backend`: the --eval-backend, --ray-address and --eval-url flags."""
    from kernelsmith.evaluate.backends import backend_overrides

    overrides: dict = {k: v for k, v in simple.items() if v is not None}
    kind, ray_address, eval_url = backend
    backend_set = backend_overrides(kind.value if kind is not None else None, ray_address, eval_url)
    if backend_set:
        overrides["backend"] = backend_set
    if llm_base_url is not None:
        overrides.setdefault("llm", {})["base_url"] = llm_base_url
    if model is not None:
        overrides.setdefault("llm", {})["models"] = [{"name": model}]
    if device is not None:
        overrides["evaluation"] = {"device": device.value}
    return overrides


def _check_model(llm_base_url: str | None, model: str | None, config: Path | None, mutator: str) -> None:
    """An endpoint without a model would send every request for the placeholder model "default":
    refuse before the first call, unless the config file names the models."""
    from kernelsmith.evolve.config import read_config_file

    if llm_base_url is None or model is not None or mutator != "llm":
        return
    llm = read_config_file(config).get("llm") if config else None
    if not (isinstance(llm, dict) and llm.get("models")):
        raise UserError(
            "--llm-base-url needs --model (the model's name at that endpoint), "
            "or a config file whose [llm] lists models"
        )


@app.command("evolve")
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
    quiet: bool = typer.Option(False, "--quiet", help="no progress lines"),
    json_out: bool = typer.Option(False, "--json", help="print summary.json's content on the last line"),
) -> None:
    """Evolve a fast Triton kernel for TASK with an LLM or the tuner; every program goes into RUN_DIR."""
    from contextlib import ExitStack, closing

    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate.backends import open_backend
    from kernelsmith.evolve.run import default_run_dir, evolve_config, run_evolve
    from kernelsmith.evolve.store import holds_run
    from kernelsmith.report import write_run_report
    from kernelsmith.seed.start import inductor_start
    from kernelsmith.task_sizes import load_task

    try:
        check_paths("file", "task file", task)
        check_paths("file", "seed file", seed)
        check_paths("file", "config file", config)
        check_paths("dir", "run directory", run_dir)
        _check_model(llm_base_url, model, config, mutator.value)
        overrides = _evolve_overrides(
            llm_base_url,
            model,
            device,
            (eval_backend, ray_address, eval_url),
            iterations=iterations,
            max_cost=max_cost,
            max_tokens=max_tokens,
            time_limit=time_limit,
            early_stop=early_stop,
            workers=workers,
        )
        t = load_task(task, small)
        seed_code = Candidate.from_file(seed).source if seed else None
        cfg = evolve_config(config, overrides, mutator.value)
        run_dir = run_dir or default_run_dir(task)
        with ExitStack() as stack:
            backend = None
            say = (lambda text: None) if quiet or json_out else (lambda text: console.print(escape(text)))
            fresh = not holds_run(run_dir)  # a resumed run keeps its stored start: no pool for it
            if seed_code is None and inductor_seed and cfg.evaluation.device == "cuda" and not small and fresh:
                backend = stack.enter_context(
                    closing(open_backend(cfg.backend, cfg.evaluation.device, cfg.workers, cfg.evaluation))
                )
                seed_code = inductor_start(t, task, run_dir, mutator.value, backend, say)
            if quiet or json_out:
                summary = run_evolve(t, seed_code, cfg, run_dir, say, backend, write_report=write_run_report)
            else:
                with LiveProgress(console, t.name, cfg.iterations) as view:
                    summary = run_evolve(
                        t, seed_code, cfg, run_dir, view.say, backend, view=view, write_report=write_run_report
                    )
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted; every evaluated program is stored: run the same command again to resume", 130)
    if json_out:
        import json

        sys.stdout.write(json.dumps(summary) + "\n")


def _print_report(report, json_out: bool, html: Path | None = None, runs_dir: Path | None = None) -> None:
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

        try:
            if runs_dir is None:
                write_suite_report(report, html)
            else:
                write_evolve_suite_report(report, runs_dir, html)
        except UserError as exc:
            fail(str(exc), exc.exit_code)


@app.command("bench")
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
    timeout: float = typer.Option(_defaults().timeout, help="wall-clock seconds per candidate"),
    build_timeout: float = typer.Option(
        _defaults().build_timeout, help="wall-clock seconds for a candidate's CUDA C++ builds (before --timeout)"
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

    try:
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
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    _print_report(report, json_out, html)


@app.command("evolve-suite")
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
    from contextlib import closing

    from kernelsmith.evaluate.backends import open_backend
    from kernelsmith.evolve.run import evolve_config
    from kernelsmith.report import write_run_report
    from kernelsmith.seed.start import inductor_start
    from kernelsmith.suite.evolve_suite import evolve_suite

    try:
        check_paths("dir", "suite directory", suite_dir)
        check_paths("dir", "seeds directory", seeds)
        check_paths("dir", "runs directory", runs_dir)
        check_paths("file", "config file", config)
        _check_model(llm_base_url, model, config, mutator.value)
        overrides = _evolve_overrides(
            llm_base_url, model, device, (eval_backend, ray_address, eval_url), iterations=iterations, workers=workers
        )
        cfg = evolve_config(config, overrides, mutator.value)
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
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted; every evaluated program is stored: run the same command again to resume", 130)
    from kernelsmith.report.suite_report import SUITE_REPORT_NAME

    _print_report(report, json_out, html or runs_dir / SUITE_REPORT_NAME, runs_dir)


@app.command("runs")
def runs_cmd(
    root: Path = typer.Argument(Path("runs"), help="folder to search for run directories"),
    json_out: bool = typer.Option(False, "--json", help="one JSON list on the last line"),
) -> None:
    """List run directories: task, iterations, best speedup, dates."""
    import json

    from kernelsmith.evolve.runs import find_runs

    skipped: list[tuple[str, str]] = []
    try:
        runs = find_runs(root, skipped=skipped)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    for folder, why in skipped:  # on stderr: --json's last line stays the list
        print(f"skipped {folder}: {why}", file=sys.stderr)
    if json_out:
        sys.stdout.write(json.dumps([r.as_dict() for r in runs]) + "\n")
        return
    if not runs:
        if not root.exists():  # before the first run: an empty listing, not an error
            console.print(
                f"no runs yet: there is no folder {root} (evolve puts each run in runs/TASK, or where --run-dir says)",
                highlight=False,
                soft_wrap=True,
            )
        else:
            console.print(f"no run directories below {root}", highlight=False, soft_wrap=True)
        return
    table = Table(title=f"runs below {root}")
    for col in ("run", "task", "iterations", "programs", "best", "started"):
        table.add_column(col, justify="right" if col in ("iterations", "programs", "best") else "left", overflow="fold")
    for r in runs:
        best = f"{r.best_speedup:.3g}x (#{r.best_program})" if r.best_speedup is not None else "-"
        where = str(Path(r.run_dir).relative_to(root)) if Path(r.run_dir).is_relative_to(root) else r.run_dir
        table.add_row(where, r.task or "?", str(r.iterations_done), str(r.programs), best, r.created or "-")
    console.print(table)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `kernelsmith evolve`"),
    out: Path | None = typer.Option(
        None, help="where the page goes: a file, or a directory for its report.html \\[default: RUN_DIR/report.html]"
    ),
) -> None:
    """Write a self-contained HTML report of a run (opens with no network)."""
    from kernelsmith.report import write_run_report

    try:
        check_paths("dir", "run directory", run_dir)
        path = write_run_report(run_dir, out)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    console.print(f"report: {path}", highlight=False, soft_wrap=True)


@app.command("export")
def export_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `kernelsmith evolve`"),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl: one JSON object per program"),
) -> None:
    """Print every program of a run, oldest first."""
    import json
    import sqlite3

    from kernelsmith.evolve.outputs import export_rows
    from kernelsmith.evolve.store import RunStore

    if fmt != "jsonl":
        fail(f"--format {fmt}: the only format is jsonl")
    try:
        check_paths("dir", "run directory", run_dir)
        store = RunStore.open_readonly(run_dir)  # reading never writes: not even the schema
        try:
            rows = list(export_rows(store))  # all read before any is printed: a damaged store prints nothing
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{store.path} is not a readable run store: {exc}") from None
        finally:
            store.close()
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    out = sys.stdout
    for row in rows:
        out.write(json.dumps(row) + "\n")


@app.command("capture")
def capture_cmd(
    entry: str = typer.Argument(
        ..., help="package.module:factory or path/to/file.py:factory, returning (model, inputs)"
    ),
    out: Path = typer.Option(..., "--out", help="directory for the task files and capture.json"),
    device: Device = typer.Option(Device.cpu, help="where the model runs: cpu, or cuda"),
    top: int | None = typer.Option(None, "--top", min=1, help="write at most this many tasks, the heaviest first"),
    min_share: float = typer.Option(0.0, "--min-share", min=0.0, max=1.0, help="skip regions below this share"),
) -> None:
    """Record one forward of a model, rank the regions a kernel would fuse by their share of its time,
    and write each as a task at its real shapes (docs/capture.md)."""
    from kernelsmith.capture.run import capture

    try:
        done = capture(entry, out, device.value, top, min_share)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
        return
    table = Table(title=f"{entry}: {done.total_us / 1000:.3g} ms of {done.measure} per forward ({done.device})")
    for col in ("rank", "task", "calls", "share", "origin"):
        table.add_column(col)
    for t in done.tasks:
        origin = f"{t.module_paths[0]} ({t.module_class})" + (f" +{len(t.module_paths) - 1}" if t.calls > 1 else "")
        table.add_row(str(t.rank), t.file or f"[dim]{t.name}: {t.why}[/]", str(t.calls), f"{t.share:.1%}", origin)
    console.print(table)
    written = sum(1 for t in done.tasks if t.file)
    console.print(
        f"{written} tasks covering {done.covered_share:.1%} of the forward in {out}/ (capture.json lists all)"
    )


@app.command("doctor")
def doctor_cmd(
    device: Device = typer.Option(Device.cpu, help="the sandbox to check: cpu, or cuda (needs a GPU)"),
    json_out: bool = typer.Option(False, "--json", help="print the findings as one JSON object on the last line"),
) -> None:
    """Which of the five containment guarantees hold here: claimed by the layers this host allows
    and tried live from inside a sandbox. Exit 0 when all hold, 1 when one does not (2: no GPU for --device cuda)."""
    from kernelsmith.evaluate import containment
    from kernelsmith.evaluate.doctor import checkup
    from kernelsmith.evaluate.pool import visible_gpus

    try:
        if device is Device.cuda and not visible_gpus():  # as EvalPool says it for every other command
            raise UserError(NO_CUDA_GPU)
        found = checkup(device.value)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    claims, live = found.plan.guarantees(), found.live_holds()
    ok = all(why is None for why in claims.values()) and all(v is not False for v in live.values())
    if json_out:
        import json

        sys.stdout.write(json.dumps(found.to_dict()) + "\n")
    else:
        table = Table(title=f"sandbox containment ({device.value}, KERNELSMITH_SANDBOX={found.plan.mode})")
        table.add_column("layer", style="bold")
        table.add_column("")
        for name, what in found.plan.summary()["layers"].items():
            table.add_row(name, what)
        console.print(table)
        table = Table()
        table.add_column("guarantee", style="bold")
        table.add_column("claimed")
        table.add_column("tried live")
        for g, text in containment.GUARANTEES.items():
            live_text = {None: "-", True: "[green]contained[/]", False: "[red]ESCAPED[/]"}[live[g]]
            tried = found.live.get(g, {})
            if live[g] is False:
                live_text += ": " + "; ".join(f"{k}: {v}" for k, v in tried.items() if v.startswith("allowed"))
            table.add_row(text, "[green]holds[/]" if claims[g] is None else f"[red]no[/]: {claims[g]}", live_text)
        console.print(table)
    raise typer.Exit(0 if ok else 1)


def _mount_subcommands() -> None:
    from kernelsmith.capture.cli import apply_cmd
    from kernelsmith.data.cli import data_app
    from kernelsmith.seed.cli import seed_cmd
    from kernelsmith.serve.cli import serve_cmd
    from kernelsmith.train.cli import train_app

    app.command("serve")(serve_cmd)
    app.command("apply")(apply_cmd)
    app.command("seed")(seed_cmd)
    app.add_typer(data_app, name="data", help="Training data from search runs: SFT steps and RL prompts.")
    app.add_typer(train_app, name="train", help="Train on that data: TRL SFT with LoRA, GRPO with the speedup reward.")


_mount_subcommands()


def main() -> None:
    """Run the app; a usage error (bad flag, bad choice, missing argument) is one `error:` line and
    exit 2, like every other error the user can cause, not click's or rich's box."""
    try:  # typer vendors click from 0.2x on: its exceptions are not the `click` package's
        from typer._click import exceptions as click
    except ImportError:
        from click import exceptions as click

    try:
        code = app(standalone_mode=False, prog_name="kernelsmith")
    except click.NoArgsIsHelpError as exc:  # `kernelsmith`, `kernelsmith data`: the help
        if exc.format_message():  # the help text; typer's rich help has printed itself already
            print(exc.format_message())
        sys.exit(2)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        print_error(exc.format_message() + hint)
        sys.exit(2)
    except click.ClickException as exc:
        print_error(exc.format_message())
        sys.exit(exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        print_error("aborted")
        sys.exit(1)
    except UserError as exc:
        print_error(str(exc))
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
