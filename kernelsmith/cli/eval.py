"""`kernelsmith eval`: one candidate against its task, the verdict as a table or one JSON line."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kernelsmith.cli.common import (
    check_paths,
    console,
    eval_defaults,
    note_full_size,
    options_or_fail,
    print_note,
)
from kernelsmith.device import Device


def print_result(result, task_name: str, candidate_name: str, profiled: bool = False) -> None:
    from kernelsmith.cli.eval_record import verdict_table

    console.print(verdict_table(result, task_name, candidate_name, profiled))
    if result.error:
        console.print("error:\n" + result.error, highlight=False, markup=False)


def eval_cmd(
    task: Path = typer.Argument(..., help="KernelBench-format task file (Model, get_inputs, get_init_inputs)"),
    candidate: Path = typer.Argument(..., help="candidate file defining ModelNew"),
    device: Device = typer.Option(Device.cuda, help="cuda, or cpu (Triton interpreter)"),
    small: bool = typer.Option(False, "--small", help="cut the task to its CPU_SIZES (bundled suite tasks)"),
    json_out: bool = typer.Option(False, "--json", help="print the verdict as one JSON object on the last line"),
    timeout: float = typer.Option(eval_defaults().timeout, help="wall-clock seconds for the candidate"),
    build_timeout: float = typer.Option(
        eval_defaults().build_timeout, help="wall-clock seconds for its CUDA C++ builds (before --timeout starts)"
    ),
    memory_limit: str = typer.Option("8G", help="host memory limit for the candidate, e.g. 3G"),
    trials: int = typer.Option(eval_defaults().trials, min=1, help="correctness trials, each on fresh random inputs"),
    compile_baseline: bool | None = typer.Option(
        None, help="also time torch.compile of the reference \\[default: on for cuda, off for cpu]"
    ),
    cache: bool = typer.Option(
        True, help="reuse and store the reference / torch.compile timings; --no-cache neither reads nor writes them"
    ),
    l2: str = typer.Option(
        eval_defaults().l2, help="cold: the L2 flushed before every timed call; warm: calls back to back"
    ),
    profile: bool = typer.Option(
        False, help="after the verdict, Nsight Compute's counters of the heaviest kernels (CUDA, where ncu runs)"
    ),
    profile_timeout: float = typer.Option(120.0, min=1, help="wall-clock seconds for --profile's stage"),
    torch_ops: str = typer.Option(
        eval_defaults().torch_ops,
        help="partial: library ops may do part of the work "
        "(KernelBench's rule); none: any library compute in forward fails",
    ),
) -> None:
    """Compile, check and time CANDIDATE against TASK; print the verdict."""
    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate import EvalOptions, evaluate
    from kernelsmith.task_sizes import load_task

    check_paths("file", "task file", task)
    check_paths("file", "candidate file", candidate)
    t = load_task(task, small)  # as evolve and bench read it
    full_size = note_full_size(t, task, device.value)
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
        l2=l2,
        torch_ops=torch_ops,
    )
    result = evaluate(t, c, opts, profile_timeout=profile_timeout if profile else None)
    if json_out:
        from kernelsmith.cli.eval_record import verdict_record

        sys.stdout.write(verdict_record(result) + "\n")
    else:
        print_result(result, t.name, c.name, profiled=profile)
    if full_size and result.status.value == "timeout":  # the size, not the candidate, is what to fix
        from kernelsmith.task_sizes import ADD_SMALL

        print_note(f"it ran out of time at the task's full size on the CPU: {ADD_SMALL}")
