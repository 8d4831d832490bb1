"""The `kernelsmith` command. Thin: parse, call the packages, print."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelsmith.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evolve fast, verified GPU kernels for PyTorch operators.")
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Evolve fast, verified GPU kernels for PyTorch operators."""


class Device(str, Enum):
    cuda = "cuda"
    cpu = "cpu"


def _defaults():
    from kernelsmith.evaluate.options import EvalOptions

    return EvalOptions()


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def options_or_fail(model, **values):
    """Build a pydantic options model; a bad value is one line and exit 2, not a traceback."""
    from pydantic import ValidationError

    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "--" + str(first["loc"][0]).replace("_", "-") if first.get("loc") else "option"
        raise UserError(f"bad value for {name}: {first['msg']}") from None


def _fmt(x, unit: str = "", digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}{unit}"


def print_result(result, task_name: str, candidate_name: str) -> None:
    colour = {"correct": "green", "incorrect": "red"}.get(result.status.value, "yellow")
    table = Table(title=f"{candidate_name} vs {task_name} ({result.device}"
                        + (f", {result.gpu_name}" if result.device == "cuda" else "") + ")", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("status", f"[{colour}]{result.status.value}[/]")
    table.add_row("speedup vs eager", _fmt(result.speedup, "x"))
    table.add_row("speedup vs torch.compile", _fmt(result.speedup_vs_compile, "x"))
    table.add_row("candidate", _fmt(result.candidate_ms, " ms", 4))
    table.add_row("reference (eager)", _fmt(result.reference_ms, " ms", 4))
    if result.compile_baseline_error:
        compiled = f"failed: {result.compile_baseline_error}"
    elif result.compile_ms is None and result.reference_ms is not None:
        compiled = "not timed (--compile-baseline times it)"
    else:
        compiled = _fmt(result.compile_ms, " ms", 4)
    table.add_row("torch.compile", compiled)
    kernels = ", ".join(result.triton_kernels + result.cuda_kernels) or "none found"
    table.add_row("kernels", kernels + (f"  ({result.kernel_launches} launches in trials)"
                                        if result.kernel_launches is not None else ""))
    if result.trials:
        worst = max((t.max_abs_err or 0.0) for t in result.trials)
        table.add_row("trials", f"{sum(t.ok for t in result.trials)}/{len(result.trials)} passed, max abs err {worst:.3g}")
    table.add_row("flags", ", ".join(result.flags) or "none")
    s = result.stages
    table.add_row("seconds", f"{s.total:.2f} total (worker start {s.worker_wait:.2f}, load {s.load:.2f}, correctness {s.correctness:.2f}, "
                             f"baseline {s.baseline:.2f}{' cached' if result.baseline_cached else ''}, timing {s.timing:.2f})")
    console.print(table)
    if result.error:
        console.print("error:\n" + result.error, highlight=False, markup=False)


@app.command("eval")
def eval_cmd(
    task: Path = typer.Argument(..., help="KernelBench-format task file (Model, get_inputs, get_init_inputs)"),
    candidate: Path = typer.Argument(..., help="candidate file defining ModelNew"),
    device: Device = typer.Option(Device.cuda, help="cuda, or cpu (Triton interpreter)"),
    json_out: bool = typer.Option(False, "--json", help="print the verdict as one JSON object on the last line"),
    timeout: float = typer.Option(_defaults().timeout, help="wall-clock seconds for the candidate"),
    memory_limit: str = typer.Option("8G", help="host memory limit for the candidate, e.g. 3G"),
    trials: int = typer.Option(_defaults().trials, min=1, help="correctness trials, each on fresh random inputs"),
    compile_baseline: bool | None = typer.Option(None, help="also time torch.compile of the reference [default: on for cuda, off for cpu]"),
    cache: bool = typer.Option(True, help="reuse cached reference / torch.compile timings"),
) -> None:
    """Compile, check and time CANDIDATE against TASK; print the verdict."""
    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate import EvalOptions, evaluate
    from kernelsmith.task import Task

    try:
        t = Task.from_file(task)
        c = Candidate.from_file(candidate)
        opts = options_or_fail(EvalOptions, device=device.value, timeout=timeout, memory_limit=memory_limit,
                               trials=trials, compile_baseline=compile_baseline, use_baseline_cache=cache)
        result = evaluate(t, c, opts)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    if json_out:
        sys.stdout.write(result.to_json() + "\n")
    else:
        print_result(result, t.name, c.name)


@app.command("evolve")
def evolve_cmd(
    task: Path = typer.Argument(..., help="KernelBench-format task file"),
    seed: Path | None = typer.Option(None, help="starting candidate (ModelNew); without it the LLM translates the reference first"),
    llm_base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"),
    model: str | None = typer.Option(None, help="model name at that endpoint (a config can list an ensemble)"),
    iterations: int | None = typer.Option(None, min=0, help="iterations in total, the start not counted [default: 40]"),
    run_dir: Path | None = typer.Option(None, help="where the run lives [default: runs/TASK]; an existing run there resumes"),
    device: Device | None = typer.Option(None, help="cuda, or cpu (Triton interpreter) [default: cuda]"),
    config: Path | None = typer.Option(None, help="TOML or YAML file with every setting (flags override it)"),
    max_cost: float | None = typer.Option(None, help="stop proposing once the run has cost this many USD"),
    max_tokens: int | None = typer.Option(None, help="stop proposing after this many tokens in total"),
    time_limit: float | None = typer.Option(None, help="stop proposing after this many seconds"),
    early_stop: int | None = typer.Option(None, help="stop after this many iterations without a new best"),
    workers: int | None = typer.Option(None, min=1, help="evaluation workers [default: one per GPU; 1 on the CPU]"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress lines"),
    json_out: bool = typer.Option(False, "--json", help="print summary.json's content on the last line"),
) -> None:
    """Evolve a fast Triton kernel for TASK with an LLM; every program goes into RUN_DIR."""
    from kernelsmith.evolve.run import run_evolve

    overrides: dict = {}
    for key, value in (("iterations", iterations), ("max_cost", max_cost), ("max_tokens", max_tokens),
                       ("time_limit", time_limit), ("early_stop", early_stop), ("workers", workers)):
        if value is not None:
            overrides[key] = value
    if llm_base_url is not None:
        overrides.setdefault("llm", {})["base_url"] = llm_base_url
    if model is not None:
        overrides.setdefault("llm", {})["models"] = [{"name": model}]
    if device is not None:
        overrides["evaluation"] = {"device": device.value}
    say = (lambda text: None) if quiet or json_out else (lambda text: console.print(text, highlight=False,
                                                                                     soft_wrap=True))
    try:
        summary = run_evolve(task, seed, config, overrides, run_dir, say)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted; every evaluated program is stored: run the same command again to resume", 130)
    if json_out:
        import json

        sys.stdout.write(json.dumps(summary) + "\n")


@app.command("export")
def export_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `kernelsmith evolve`"),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl: one JSON object per program"),
) -> None:
    """Print every program of a run, oldest first."""
    import json

    from kernelsmith.evolve.outputs import export_rows
    from kernelsmith.evolve.store import RunStore

    if fmt != "jsonl":
        fail(f"--format {fmt}: the only format is jsonl")
    try:
        store = RunStore(run_dir, create=False)
    except UserError as exc:
        fail(str(exc), exc.exit_code)
    out = sys.stdout
    for row in export_rows(store):
        out.write(json.dumps(row) + "\n")
    store.close()


def main() -> None:
    try:
        app()
    except UserError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
