"""How `kernelsmith eval` shows one verdict: the table, and the JSON record `--json` prints."""

from __future__ import annotations

import json
import math

from rich.markup import escape
from rich.table import Table

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.evaluate.measuring.roofline import fraction, of_floor
from kernelsmith.evaluate.result import EvalResult, TrialReport
from kernelsmith.progress import counted


def verdict_record(result: EvalResult) -> str:
    """The verdict as one JSON line, with `success` (EvalResult.success, the one rule) added:
    scripts read it instead of re-deriving it from status and flags."""
    record = json.loads(result.to_json())  # pydantic's JSON (NaN/inf as null), then one key more
    record["success"] = result.success
    return json.dumps(record)


def _fmt(x, unit: str = "", digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}{unit}"


def _speedup(x: float | None, device: str) -> str:
    if x is None or device == "cuda":
        return _fmt(x, "x")
    return f"{_fmt(x, 'x')} ({CPU_SPEEDUP_NOTE})"


def status_text(result: EvalResult) -> str:
    """The status row: the status, then plainly whether the verdict is a success."""
    if result.success:
        return f"[green]{result.status.value} -> success[/]"
    if result.correct:
        flags = ", ".join(f.value for f in result.flags)
        return f"[yellow]correct, but flagged: {flags} -> not a success[/]"
    colour = "red" if result.status.value == "incorrect" else "yellow"
    return f"[{colour}]{result.status.value} -> not a success[/]"


def no_counters_reason(result: EvalResult) -> str:
    """Why `--profile` left no counters: only a success is profiled (kernelsmith.evaluate.evaluate),
    and Nsight Compute needs a CUDA GPU."""
    why = [] if result.success else ["only a success is profiled, and this verdict is not one"]
    if result.device != "cuda":
        why.append("hardware counters need a CUDA GPU and Nsight Compute")
    return "none: " + "; ".join(why or ["the profile stage did not run"])


def trials_text(trials: list[TrialReport]) -> str:
    """'2/3 passed, max abs err 0.5': the max over the trials that sent output (a NaN among them is
    the max); a trial that sent none (it raised, crashed or timed out) is named, the error says why."""
    text = f"{sum(t.ok for t in trials)}/{len(trials)} passed"
    errs = [t.max_abs_err for t in trials if t.max_abs_err is not None]
    if errs:
        worst = math.nan if any(math.isnan(e) for e in errs) else max(errs)
        text += f", max abs err {worst:.3g}"
    silent = next((i + 1 for i, t in enumerate(trials) if not t.answered), None)  # the last, if any
    if silent is not None:
        text += f"; trial {silent} sent no output (see the error)"
    return text


def verdict_table(result: EvalResult, task_name: str, candidate_name: str, profiled: bool = False) -> Table:
    """`profiled`: --profile was asked for, so a verdict without counters says why."""
    table = Table(
        title=f"{escape(candidate_name)} vs {escape(task_name)} ({result.device}"
        + (f", {result.gpu_name}" if result.device == "cuda" else "")
        + ")",
        show_header=False,
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("status", status_text(result))
    _time_rows(table, result)
    _kernel_rows(table, result)
    _counter_rows(table, result, profiled)
    _check_rows(table, result)
    s = result.stages
    table.add_row(
        "seconds",
        f"{s.total:.2f} total (build {s.build:.2f}, worker start {s.worker_wait:.2f}, load {s.load:.2f}, "
        f"correctness {s.correctness:.2f}, "
        f"baseline {s.baseline:.2f}{_reused(result)}, "
        + (f"settle {s.settle:.2f}, " if s.settle >= 0.005 else "")
        + f"timing {s.timing:.2f})",
    )
    return table


# What `speedup` compares (EvalResult.speedup_basis), as the table says it.
BASIS_TEXT = {
    "device_time": "device time per call, CUDA graph",
    "synced_call": "per-call synced time: not capturable in a CUDA graph",
    "cpu_wall": "wall time per call",
}


def _time_rows(table: Table, result: EvalResult) -> None:
    """The speedups, and the times they come from: device time per call (what `speedup` compares on
    CUDA) and the eager call time beside it (launch overhead included)."""
    basis = BASIS_TEXT.get(result.speedup_basis or "", "")
    table.add_row("speedup vs reference", _speedup(result.speedup, result.device) + (f"  ({basis})" if basis else ""))
    table.add_row("speedup vs torch.compile", _speedup(result.speedup_vs_compile, result.device))
    eager = [_fmt(result.eager_speedup, "x vs reference"), _fmt(result.eager_speedup_vs_compile, "x vs torch.compile")]
    if result.eager_speedup is not None:
        table.add_row(
            "eager speedup", ", ".join(e for e in eager if e != "-") + "  (eager call time, launches included)"
        )
    table.add_row("candidate", _times(result.candidate_ms, result.eager_ms))
    table.add_row("reference", _times(result.reference_ms, result.reference_eager_ms))
    if result.compile_baseline_error:
        compiled = f"failed: {result.compile_baseline_error}"
    elif result.compile_ms is None and result.reference_ms is not None:
        compiled = "not timed (--compile-baseline times it)"
    else:
        compiled = _times(result.compile_ms, result.compile_eager_ms)
    table.add_row("torch.compile", compiled)
    if result.timing_method:
        how = result.timing_method + (f"; {result.timing_fallback}" if result.timing_fallback else "")
        if result.judge_timing is not None:
            j = result.judge_timing
            how += f"; judge's clock {_fmt(j.per_call_ms, ' ms', 4)} a call over {counted(j.calls, 'call', 'calls')}"
        table.add_row("timing", how)
    if result.baseline_unsteady:
        again = ", measured for an earlier verdict of this run" if result.baseline_source == "this run" else ""
        table.add_row("baseline", f"not cached, too spread{again}: {result.baseline_unsteady}")


def _reused(result: EvalResult) -> str:
    """Where reused baselines came from, as the seconds row says it ('' where they were measured)."""
    if result.baseline_source in ("this run", "cache"):
        return f" ({result.baseline_source})"
    return " cached" if result.baseline_cached else ""


def _times(device_ms: float | None, eager_ms: float | None) -> str:
    text = _fmt(device_ms, " ms", 4)
    return text + (f"  (eager call {_fmt(eager_ms, ' ms', 4)})" if eager_ms is not None else "")


def _kernel_rows(table: Table, result: EvalResult) -> None:
    """The candidate's kernels, and where the forward's device time goes (CUDA profiler, correctness trials)."""
    kernels = ", ".join(result.triton_kernels + result.cuda_kernels) or "none found"
    table.add_row(
        "kernels",
        kernels
        + (
            f"  ({counted(result.kernel_launches, 'launch', 'launches')} in trials)"
            if result.kernel_launches is not None
            else ""
        ),
    )
    timed = [k for k in result.kernels if k.ms is not None and k.share is not None]
    if timed:
        from kernelsmith.evaluate.measuring.breakdown import short_name

        head = f"{_fmt(result.kernel_ms, ' ms', 4)} of kernels per call"
        rows = [
            f"{k.share:4.0%} {k.ms:.4g} ms {short_name(k.name, 60)} ({'own' if k.own else 'library'})"
            for k in timed[:6]
        ]
        more = f"\n... {len(timed) - 6} more" if len(timed) > 6 else ""
        table.add_row("time by kernel", head + "\n" + "\n".join(rows) + more)


def _counter_rows(table: Table, result: EvalResult, profiled: bool) -> None:
    """eval --profile: Nsight Compute on the heaviest kernels, or why there are no counters."""
    if result.counters is not None:
        from kernelsmith.evaluate.counters import counters_text
        from kernelsmith.evaluate.measuring.breakdown import short_name

        rep = result.counters
        if rep.status == "ok":
            rows = [
                f"{short_name(k.name, 60)} x{k.launches}: {k.bottleneck()}\n  {counters_text(k)}" for k in rep.kernels
            ]
            table.add_row(
                "counters",
                "\n".join(rows) + f"\n({counted(rep.launches, 'launch', 'launches')} profiled in {rep.seconds:.1f} s)",
            )
        else:
            table.add_row("counters", f"none ({rep.status}): {rep.message or ''}")
    elif profiled:
        table.add_row("counters", no_counters_reason(result))


def _check_rows(table: Table, result: EvalResult) -> None:
    """The speed of light, the trials, flags and task notes, the operator rule and the sandbox's containment."""
    if result.floor_ms and result.candidate_ms:  # the task's floor on the card (the CPU has none)
        table.add_row(
            "speed of light",
            f"{result.floor_ms:.4g} ms (the task's floor: bytes / measured bandwidth, FLOPs / measured peak): "
            f"the candidate runs at {fraction(of_floor(result.floor_ms, result.candidate_ms))} of it",
        )
    if result.trials:
        table.add_row("trials", trials_text(result.trials))
    table.add_row("flags", ", ".join(f.value for f in result.flags) or "none")
    for note, detail in result.task_notes.items():
        table.add_row("task note", f"{note.value}: {detail}")
    table.add_row(
        "operator rule",
        f"--torch-ops {result.torch_ops}"
        + (f" (decided from {result.activity_source} activity)" if result.activity_source else ""),
    )
    if result.containment:
        missing = [g for g, v in result.containment.get("guarantees", {}).items() if v != "holds"]
        layers = [k for k, v in result.containment.get("layers", {}).items() if str(v).startswith("on")]
        table.add_row(
            "containment",
            (", ".join(layers) or "no layer")
            + (
                f"; NOT contained: {', '.join(missing)} (kernelsmith doctor)"
                if missing
                else "; all five guarantees hold"
            ),
        )
