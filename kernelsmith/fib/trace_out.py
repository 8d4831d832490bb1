"""A kernelsmith verdict as a flashinfer-bench Trace's evaluation.

| verdict                              | Trace status        | correctness / performance              |
| correct, no flag (a success)         | PASSED              | max errors over the trials / the times |
| correct but flagged                  | RUNTIME_ERROR       | none; the log names the flags          |
| incorrect: a shape / a dtype         | INCORRECT_SHAPE / INCORRECT_DTYPE | none                     |
| incorrect: values                    | INCORRECT_NUMERICAL | max errors over the trials             |
| compile_error / runtime_error / timeout | COMPILE_ERROR / RUNTIME_ERROR / TIMEOUT | none            |
| rejected (no kernel of its own ran)  | RUNTIME_ERROR       | none; the log says it was rejected     |

flashinfer-bench's apply() serves a PASSED Trace only where both its errors are within ApplyConfig's
max_atol and max_rtol (defaults 1e-2 and 1e-5; a bf16 kernel is one rounding step off, 0.03125 near 4):
`serving_tolerance` says what a Trace needs, and export-fib prints it beside the Solution.
latency_ms is the verdict's candidate_ms (device time per call on CUDA: CUDA-graph replays read from the
device's kernel timestamps; CPU wall time of Triton's interpreter on the CPU, relative only, which the log
and the hardware say), reference_latency_ms its reference_ms, speedup_factor its speedup. flashinfer-bench
has no status for a flagged kernel: it is never PASSED, so its apply() never serves it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from flashinfer_bench.data import Correctness, Environment, Evaluation, EvaluationStatus, Performance

from kernelsmith.evaluate.result import EvalResult, Status

CPU_HARDWARE = "CPU (Triton interpreter)"
STATUS = {
    Status.compile_error: EvaluationStatus.COMPILE_ERROR,
    Status.runtime_error: EvaluationStatus.RUNTIME_ERROR,
    Status.timeout: EvaluationStatus.TIMEOUT,
    Status.rejected: EvaluationStatus.RUNTIME_ERROR,
}


def _errors(r: EvalResult) -> Correctness:
    abs_errs = [t.max_abs_err for t in r.trials if t.max_abs_err is not None]
    rel_errs = [t.max_rel_err for t in r.trials if t.max_rel_err is not None]
    return Correctness(
        max_absolute_error=max(abs_errs, default=0.0),
        max_relative_error=max(rel_errs, default=0.0),
        extra={"trials": len(r.trials), "kernelsmith_status": r.status.value},
    )


def _incorrect(r: EvalResult) -> EvaluationStatus:
    said = " ".join(t.message or "" for t in r.trials if not t.ok)
    if ": shape " in said:
        return EvaluationStatus.INCORRECT_SHAPE
    if ": dtype " in said:
        return EvaluationStatus.INCORRECT_DTYPE
    return EvaluationStatus.INCORRECT_NUMERICAL


def _log(r: EvalResult) -> str:
    lines = [f"kernelsmith verdict: {r.status.value}" + (", a success" if r.success else ", not a success")]
    if r.flags:
        lines.append("flags: " + "; ".join(f"{f.value}: {r.flag_details.get(f, '')}".rstrip(": ") for f in r.flags))
    if r.speedup is not None:
        lines.append(
            f"speedup {r.speedup:.4g}x over the task's reference ({r.speedup_basis or 'unknown basis'}, "
            f"timed by {r.timing_method or 'unknown method'})"
        )
    if r.device == "cpu":
        lines.append("times: the CPU's wall time of Triton's interpreter, meaningful only relative to each other")
    if r.error:
        lines.append(r.error)
    return "\n".join(lines)


def evaluation(
    r: EvalResult, when: float | None = None, libs: dict[str, str] | None = None, note: str | None = None
) -> Evaluation:
    """The Trace evaluation of verdict `r` (made at `when`, seconds since the epoch; now when None); `note`:
    a line its log adds (the sizes it was judged at, where they are not the workload's)."""
    hardware = (r.gpu_name or "CUDA GPU") if r.device == "cuda" else CPU_HARDWARE
    env = Environment(
        hardware=hardware, libs={**({"torch": r.torch_version} if r.torch_version else {}), **(libs or {})}
    )
    stamp = datetime.fromtimestamp(when, UTC) if when else datetime.now(UTC)
    status, correctness, perf = STATUS.get(r.status, EvaluationStatus.RUNTIME_ERROR), None, None
    if r.status is Status.correct and r.success:
        status, correctness = EvaluationStatus.PASSED, _errors(r)
        perf = Performance(
            latency_ms=r.candidate_ms or 0.0,
            reference_latency_ms=r.reference_ms or 0.0,
            speedup_factor=r.speedup or 0.0,
        )
    elif r.status is Status.incorrect:
        status = _incorrect(r)
        correctness = _errors(r) if status is EvaluationStatus.INCORRECT_NUMERICAL else None
    return Evaluation(
        status=status,
        environment=env,
        timestamp=stamp.isoformat(timespec="seconds"),
        log=_log(r) + (f"\n{note}" if note else ""),
        correctness=correctness,
        performance=perf,
    )


def _at_least(x: float) -> float:
    """The least number of two significant digits that is not below `x` (0.03125 -> 0.032)."""
    exp = math.floor(math.log10(x)) - 1
    up = float(f"{math.ceil(round(x / 10**exp, 9)) * 10**exp:.2g}")
    return up if up >= x else float(f"{up + 10**exp:.2g}")


def serving_tolerance(e: Evaluation) -> tuple[float, float] | None:
    """The (max_atol, max_rtol) of flashinfer-bench's ApplyConfig under which its apply() serves a Trace of
    evaluation `e` (its filter: status PASSED, both errors within them), or None when it serves none. An
    error of 0 takes ApplyConfig's own default, which it is within."""
    from flashinfer_bench.apply.config import ApplyConfig

    if e.status is not EvaluationStatus.PASSED or e.correctness is None:
        return None
    fields = ApplyConfig.model_fields
    errors = (e.correctness.max_absolute_error, e.correctness.max_relative_error)
    defaults = (fields["max_atol"].default, fields["max_rtol"].default)
    atol, rtol = (default if err <= default else _at_least(err) for err, default in zip(errors, defaults))
    return atol, rtol
