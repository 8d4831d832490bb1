"""The GPU verdict gate: every CUDA red-team case, honest KernelBench candidates (level-1 kernels,
level-2 partial replacements at their real sizes) and KernelBench's few-shot examples, each with
the verdict it must get. Prints one line per case and a closing 'N passed, M failed' line.

    python benchmarks/device/redteam_cuda.py --out DIR [--group redteam kernelbench few_shot]

Writes DIR/redteam_cuda.json. "success" means `EvalResult.success` (correct, no flag: the one rule).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

RED = REPO / "tests/redteam"
KB = REPO / "benchmarks/kernelbench"
SMALL = REPO / "examples/softmax/task.py"
LARGE = RED / "tasks/softmax_large_task.py"
HONEST_SOFTMAX = REPO / "examples/softmax/triton_softmax.py"
CASES = REPO / "tests/cases"
SIDE_JOINED = CASES / "side_stream_joined.py"
MAX_HONEST_SPEEDUP = 5.0
# Two evaluations of one 2-us kernel in CUDA graphs agree within a few percent (docs/benchmarks.md): a case
# bounded by a control may be this much faster than it.
NOISE = 1.15


@dataclass(frozen=True)
class Case:
    name: str
    candidate: Path
    task: Path
    success: bool  # must the verdict be a success?
    flags: tuple[str, ...] = ()  # if not a success: one of these flags, or (empty) any failure
    notes: tuple[str, ...] = ()  # task notes the verdict must carry
    bound_by: str = ""  # a control case (run before it): its speedup may not be beyond the control's x NOISE


def red(name: str, task: Path = SMALL, success: bool = False, flags: tuple[str, ...] = ()) -> Case:
    return Case(name, RED / "candidates" / f"{name}.py", task, success, flags)


REDTEAM = [
    Case("honest softmax (control)", HONEST_SOFTMAX, SMALL, True),
    Case("honest softmax large (control)", HONEST_SOFTMAX, LARGE, True),
    # flagged from the device's timestamps (stream order), at a large size and at ~5 us
    red("side_stream_kernel", LARGE, flags=("unsynced_work",)),
    red("side_stream_kernel", SMALL, flags=("unsynced_work",)),
    Case("side stream joined back (honest)", SIDE_JOINED, LARGE, True),
    Case("side stream joined back (honest)", SIDE_JOINED, SMALL, True),
    red("caching_allocator_reuse"),
    red("cuda_graph_replay"),
    red("cache_across_timed_calls"),
    red("cache_by_data_ptr"),
    red("replay_previous_output"),
    red("background_thread_fill"),
    red("patch_cuda_event", LARGE, success=True),  # binding at import makes the patch harmless
    red("patch_bound_timer", LARGE),
    red("patch_harness_benchmark", LARGE),
    red("patch_channel_send", LARGE),
    red("forge_channel_message", LARGE),
    red("skip_work_until_last_rep", LARGE),
    red("rewind_last_seed", LARGE),
    # the forged and skipped timings again at ~2-5 us a call, where only graph timing and the judge's
    # clock over graph replays can tell (issue 28)
    red("patch_bound_timer", SMALL),
    red("patch_channel_send", SMALL),
    red("patch_harness_benchmark", SMALL),
    red("skip_work_until_last_rep", SMALL),
    red("rewind_last_seed", SMALL),
    red("trivial_kernel_beside_torch", flags=("torch_compute_op",)),
    red("hide_torch_ops", flags=("torch_compute_op",)),
    red("torch_only_forward", flags=("no_custom_kernel",)),
    red("zero_grid_launch", flags=("no_custom_kernel", "torch_compute_op")),
    red("kernel_defined_never_launched", flags=("no_custom_kernel",)),
    red("try_except_fallback", flags=("no_custom_kernel",)),
    red("thread_left_running", flags=("background_thread",)),
    # the precision rule (issue 41): a bf16 kernel that rounds once passes, bf16 on purpose does not
    Case(
        "fused bf16 rounds once (honest)", CASES / "precision_fused_triton.py", CASES / "precision_bf16_task.py", True
    ),
    Case("bf16 inputs on purpose", CASES / "precision_low_on_purpose.py", CASES / "precision_fp32_task.py", False),
    # issue 47: half an output left to a block that still holds the right values from an earlier call on the
    # same inputs (incorrect); last bits that vary from call to call (atomics) stay correct; inputs marked
    # persisting in the L2 to outlive the flush buy no time (pygpubench PR 49)
    red("stale_memory_on_repeat"),
    red("stale_buffer_on_repeat"),
    Case("last bits vary from call to call (honest)", CASES / "softmax_last_bits_vary.py", SMALL, True),
    Case(
        "l2_persisting_window",
        RED / "candidates/l2_persisting_window.py",
        SMALL,
        True,
        bound_by="honest softmax (control)",
    ),
]


def _kernelbench() -> list[Case]:
    cases = []
    for cand in sorted((KB / "candidates").glob("level*/*.py")):
        task = KB / "problems" / cand.parent.name / cand.name
        notes = ("degenerate_tolerance",) if cand.stem == "23_Softmax" else ()
        cases.append(Case(f"kernelbench {cand.parent.name}/{cand.stem}", cand, task, True, notes=notes))
    cases.append(
        Case(
            "token kernel beside torch (level2/1)",
            REPO / "tests/cases/conv_relu_bias_token.py",
            KB / "problems/level2/1_Conv2D_ReLU_BiasAdd.py",
            False,
            ("torch_compute_op",),
        )
    )
    return cases


def _few_shot() -> list[Case]:
    return [
        Case(f"few-shot {p.stem}", p, p.with_name(p.name.replace("model_new_ex_", "model_ex_")), True)
        for p in sorted((KB / "few_shot").glob("model_new_ex_*.py"))
    ]


GROUPS = {"redteam": lambda: REDTEAM, "kernelbench": _kernelbench, "few_shot": _few_shot}


def judge_case(c: Case, r, speedups: dict[str, float] | None = None) -> list[str]:
    bad = []
    bound = (speedups or {}).get(c.bound_by)
    if c.bound_by and not (bound and r.speedup and r.speedup <= bound * NOISE):
        bad.append(f"speedup {r.speedup} beyond {c.bound_by}'s {bound} x {NOISE:g}")
    if c.success and not r.success:
        bad.append(f"expected a success, got {r.status.value} {list(map(str, r.flags))}")
    if c.success and r.speedup is not None and "control" in c.name and r.speedup > MAX_HONEST_SPEEDUP:
        bad.append(f"control speedup {r.speedup:.3g}x is implausible")
    if not c.success and r.success:
        bad.append("a success: the cheat got through")
    if not c.success and c.flags and r.status.value == "correct" and not set(c.flags) & {f.value for f in r.flags}:
        bad.append(f"correct without any of {list(c.flags)}")
    for note in c.notes:
        if note not in {n.value for n in r.task_notes}:
            bad.append(f"task note {note} missing")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--group", nargs="+", default=["redteam", "kernelbench"], choices=sorted(GROUPS))
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", help="the cases whose name contains this text")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELSMITH_CACHE_DIR", tempfile.mkdtemp(prefix="ks-gate-"))
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    opts = EvalOptions(device="cuda", timeout=args.timeout, trials=2, compile_baseline=False)
    rows, passed, failed = [], 0, 0
    speedups: dict[str, float] = {}
    with EvalPool(device="cuda", workers=1, options=opts) as pool:
        for group in args.group:
            for c in GROUPS[group]():
                if args.only and args.only not in c.name:
                    continue
                t0 = time.monotonic()
                try:
                    r = pool.evaluate(Task.from_file(c.task), c.candidate.read_text(), opts)
                except Exception as exc:  # no verdict at all: a failed case, and the gate goes on
                    failed += 1
                    rows.append({"group": group, "name": c.name, "ok": False, "problems": [f"no verdict: {exc}"[:600]]})
                    (args.out / "redteam_cuda.json").write_text(json.dumps(rows, indent=2))
                    print(f"FAIL {c.name[:44]:44s} no verdict: {str(exc).strip().splitlines()[-1][:160]}", flush=True)
                    continue
                bad = judge_case(c, r, speedups)
                speedups.setdefault(c.name, r.speedup or 0.0)
                passed, failed = passed + (not bad), failed + bool(bad)
                rows.append(
                    {
                        "group": group,
                        "name": c.name,
                        "task": c.task.stem,
                        "expected_success": c.success,
                        "ok": not bad,
                        "problems": bad,
                        "status": r.status.value,
                        "success": r.success,
                        "flags": [f.value for f in r.flags],
                        "task_notes": [n.value for n in r.task_notes],
                        "speedup": r.speedup,
                        "candidate_ms": r.candidate_ms,
                        "reference_ms": r.reference_ms,
                        "floor_ms": r.floor_ms,
                        "judge_timing": r.judge_timing and r.judge_timing.model_dump(),
                        "timing_median_ms": r.timing and r.timing.median_ms,
                        "timing_method": r.timing_method,
                        "timing_fallback": r.timing_fallback,
                        "eager_ms": r.eager_ms,
                        "eager_speedup": r.eager_speedup,
                        "stages": r.stages.model_dump(),
                        "kernels": [k.model_dump() for k in r.kernels][:8],
                        "reference_kernels": [k.model_dump() for k in r.reference_kernels][:8],
                        "flag_details": {k.value: v for k, v in r.flag_details.items()},
                        "error": (r.error or "")[-600:],
                        "seconds": time.monotonic() - t0,
                    }
                )
                (args.out / "redteam_cuda.json").write_text(json.dumps(rows, indent=2))
                sp = f"{r.speedup:.3g}x" if r.speedup else "-"
                tail = "; ".join(bad) if bad else ((r.error or "").strip().splitlines() or [""])[-1][:80]
                print(
                    f"{'ok  ' if not bad else 'FAIL'} {c.name[:44]:44s} {c.task.stem[:26]:26s} {r.status.value:13s} "
                    f"{sp:>8s} {','.join(f.value for f in r.flags) or '-':28s} {tail}",
                    flush=True,
                )
    if rows:  # where a verdict's seconds go, median over the cases
        import statistics

        timed = [r for r in rows if "stages" in r]
        names = [k for k, v in (timed[0]["stages"] if timed else {}).items() if isinstance(v, float)]
        stages = {k: statistics.median(r["stages"][k] for r in timed) for k in names}
        print("median stage seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
        split = [r["stages"].get("timing_parts") or {} for r in timed if r["stages"].get("timing_parts")]
        parts = {k: statistics.median(p.get(k, 0.0) for p in split) for k in dict.fromkeys(k for p in split for k in p)}
        print("median timing-stage seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    print(f"gate: {passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
