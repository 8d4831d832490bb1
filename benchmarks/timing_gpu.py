"""Issue 28's measurement: are the verdict's times steady and right at serving sizes (2-100 us)?
docs/benchmarks.md, "Microsecond timing", says what each column means.

First, while the machine is quiet, `kernelsmith eval examples/softmax/task.py
examples/softmax/triton_softmax.py --json` three times in a row as subprocesses, as a user runs it (a
fresh cache: the first run times the baselines, the others reuse them). Then, for each task/candidate
pair of PLAN (a task file of benchmarks/microsecond/, one per operator, at the sizes and dtype the pair sets
in it), in this one process:

* --evals verdicts with the L2 flushed before every call (the default) and --warm-evals with
  l2="warm", through EvalPool(workers=1). Every verdict is given use_baseline_cache=False and
  reuse_baselines=False, so each one times the reference afresh: the speedups are independent ratios,
  and the reference's spread between evaluations is measured too. (With the cache, or with the judge's
  own memory of the figures it measured, one measurement of the reference would stand in every later
  verdict; and a verdict with use_baseline_cache=False neither reads nor writes the file.) Each verdict
  runs in a fresh sandbox that compiles the kernel anew. torch.compile is off: not what this measures,
  and its compilation would cost ~10 s a verdict.
* Beside them, timers of the same forwards that share no code with the harness (timing_independent.py):
  Triton's do_bench_cudagraph (one input set, calls back to back: L2 warm, set against the warm verdicts)
  and a flush-subtracted graph (L2 cold, set against the default verdicts).

KernelBench level-1 19_ReLU, 23_Softmax and 36_RMSNorm_ (benchmarks/kernelbench, at KernelBench's sizes:
kernels of 3-5 ms) get --kb-evals verdicts each through the same pool, between the pairs (PLAN's order).

    python benchmarks/timing_gpu.py --out DIR [--deadline 500]
    python benchmarks/timing_gpu.py --device cpu --quick --out DIR   # the same path on the CPU, tiny sizes

Writes DIR/timing_gpu.json (every row, rewritten after each kernel), DIR/verdicts.jsonl (each verdict
whole) and DIR/table.txt, and prints the table last. --deadline (seconds from the start): a kernel
starts only while its verdicts, at the slowest seconds per verdict of its kind so far, would end before
it; what did not start is listed as skipped. On the CPU the independent timers are skipped (CUDA
graphs); the candidate and reference are still built and compared in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing_table import table  # noqa: E402

from kernelsmith.evaluate import EvalOptions, EvalPool, EvalResult  # noqa: E402
from kernelsmith.task import Task  # noqa: E402
from kernelsmith.task_sizes import read_cpu_sizes, small_source  # noqa: E402

MICRO = ROOT / "benchmarks" / "microsecond"
KB = ROOT / "benchmarks" / "kernelbench"
CLI_PAIR = ("examples/softmax/task.py", "examples/softmax/triton_softmax.py")
VERDICT_TIMEOUT_S = 90.0  # a verdict not back by then: the pool is replaced and the kernel goes on
CLI_TIMEOUT_S = 90.0  # a warm `kernelsmith eval` took 8 s on the H200, a cold one 20 s
# Before the first KernelBench task, its seconds per verdict are guessed from the microsecond pairs':
# 6.4-7.5 GB inputs, made and refilled on the device, and 3-5 ms calls.
KB_HEAVIER = 2.5


@dataclass(frozen=True)
class Pair:
    kind: str  # "microsecond" (benchmarks/microsecond) or "kernelbench"
    name: str
    task: Path
    candidate: Path
    # The module-level constants this pair sets in its task file (an int, or source such as "torch.float32"):
    # one file per operator, its sizes and dtypes here.
    constants: dict[str, int | str] = field(default_factory=dict)
    # For task files that declare no CPU_SIZES (KernelBench's): the values the CPU run gives their sizes.
    cpu_sizes: dict[str, int] | None = None

    def task_source(self, device: str) -> str:
        source = set_constants(self.task.read_text(encoding="utf-8"), self.constants)
        if device == "cuda":
            return source
        cpu = self.cpu_sizes or read_cpu_sizes(source)
        if cpu:  # a size set below the file's CPU size keeps its own value there too (one token stays one)
            cpu = {k: min(v, c) if isinstance(c := self.constants.get(k), int) else v for k, v in cpu.items()}
            source += f"\n\nCPU_SIZES = {cpu!r}\n"  # the last CPU_SIZES is the one read
        return small_source(source)


def set_constants(source: str, values: dict[str, int | str]) -> str:
    """`source` with each module-level `NAME = ...` line named in `values` set to its value."""
    for name, value in values.items():
        source, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", source, count=1, flags=re.M)
        if n != 1:
            raise ValueError(f"no module-level `{name} = ...` line to set")
    return source


def _micro(name: str, op: str, **constants: int | str) -> Pair:
    """`name` (the table's), the task file benchmarks/microsecond/OP.py with `constants` set, OP_triton.py."""
    return Pair("microsecond", name, MICRO / f"{op}.py", MICRO / f"{op}_triton.py", constants)


def _kb(name: str, cpu_sizes: dict[str, int]) -> Pair:
    level1 = KB / "problems/level1"
    return Pair("kernelbench", name, level1 / f"{name}.py", KB / "candidates/level1" / f"{name}.py", {}, cpu_sizes)


F32, BF16 = "torch.float32", "torch.bfloat16"
# In order of priority, since a deadline drops the last: the two softmaxes, one of each kind of
# kernel, KernelBench, then the other sizes and dtypes.
PLAN = [
    _micro("softmax_64x512_f32", "softmax", ROWS=64, COLS=512),
    _micro("softmax_4096x8192_f32", "softmax", ROWS=4096, COLS=8192),
    _micro("rmsnorm_1x4096_bf16", "rmsnorm", TOKENS=1, HIDDEN=4096, DTYPE=BF16),
    _micro("gemv_1x4096_bf16", "gemv", BATCH=1, IN_FEATURES=4096),
    _micro("add_32x4096_bf16", "add"),
    _micro("gelu_4096x4096_f32", "gelu"),
    _micro("rmsnorm_32x4096_f32", "rmsnorm", TOKENS=32, HIDDEN=4096, DTYPE=F32),
    _kb("19_ReLU", {"batch_size": 4, "dim": 300}),
    _kb("23_Softmax", {"batch_size": 4, "dim": 300}),
    _kb("36_RMSNorm_", {"batch_size": 2, "features": 4, "dim1": 6, "dim2": 7}),
    _micro("silu_mul_32x14336_bf16", "silu_mul"),
    _micro("gemv_8x4096_bf16", "gemv", BATCH=8, IN_FEATURES=4096),
    _micro("rmsnorm_32x4096_bf16", "rmsnorm", TOKENS=32, HIDDEN=4096, DTYPE=BF16),
    _micro("rmsnorm_1x4096_f32", "rmsnorm", TOKENS=1, HIDDEN=4096, DTYPE=F32),
]
# --quick: weights, bf16 and tl.dot (the most paths), and one KernelBench task.
QUICK = ("rmsnorm_32x4096_bf16", "gemv_8x4096_bf16", "19_ReLU")


# -- the run's clock and output ------------------------------------------------------------------


class Schedule:
    """The deadline: a kernel starts only while `elapsed + verdicts x the slowest seconds per verdict of
    its kind so far` stays within it (the first of a kind: the other kind's rate, x KB_HEAVIER for
    KernelBench's)."""

    def __init__(self, deadline_s: float):
        self.t0 = time.monotonic()
        self.deadline_s = deadline_s
        self.per_verdict: dict[str, float] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def why_not(self, kind: str, verdicts: int) -> str | None:
        rate = self.per_verdict.get(kind)
        if rate is None:
            rate = max(self.per_verdict.values(), default=0.0) * (KB_HEAVIER if kind == "kernelbench" else 1.0)
        need = rate * verdicts
        if self.elapsed() + need > self.deadline_s:
            return (
                f"deadline: {self.elapsed():.0f} s gone, ~{need:.0f} s more needed, --deadline {self.deadline_s:.0f} s"
            )
        return None

    def record(self, kind: str, seconds: float, verdicts: int) -> None:
        self.per_verdict[kind] = max(self.per_verdict.get(kind, 0.0), seconds / max(verdicts, 1))


@dataclass
class Report:
    out: Path
    meta: dict
    cli: dict | None = None
    pairs: list[dict] = field(default_factory=list)
    kernelbench: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    def save(self) -> None:
        data = {
            "meta": self.meta,
            "cli": self.cli,
            "pairs": self.pairs,
            "kernelbench": self.kernelbench,
            "skipped": self.skipped,
        }
        tmp = self.out / "timing_gpu.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.out / "timing_gpu.json")

    def verdict(self, kernel: str, l2: str, index: int, result: EvalResult) -> None:
        line = {"kernel": kernel, "l2": l2, "index": index, "verdict": json.loads(result.to_json())}
        with open(self.out / "verdicts.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


# -- verdicts -------------------------------------------------------------------------------------


class Pool:
    """The run's one EvalPool (workers=1), started again when a verdict does not come back in time."""

    def __init__(self, device: str):
        self.device = device
        self.pool: EvalPool | None = None

    def get(self) -> EvalPool:
        if self.pool is None:
            self.pool = EvalPool(device=self.device, workers=1, options=EvalOptions(device=self.device))
        return self.pool

    def evaluate(self, task: Task, source: str, opts: EvalOptions) -> EvalResult:
        fut = self.get().submit(task, source, opts)
        try:
            return fut.result(timeout=VERDICT_TIMEOUT_S)
        except TimeoutError:
            self.close(wait=0)  # its judge is killed; the next verdict starts a new pool
            raise

    def close(self, wait: float | None) -> None:
        if self.pool is not None:
            self.pool.close(wait=wait)
            self.pool = None


def verdict_row(r: EvalResult, wall_s: float) -> dict:
    jt = r.judge_timing
    return {
        "status": r.status.value,
        "success": r.success,
        "flags": [f.value for f in r.flags],
        "candidate_ms": r.candidate_ms,
        "reference_ms": r.reference_ms,
        "speedup": r.speedup,
        "eager_ms": r.eager_ms,
        "reference_eager_ms": r.reference_eager_ms,
        "eager_speedup": r.eager_speedup,
        "speedup_basis": r.speedup_basis,
        "timing_method": r.timing_method,
        "timing_fallback": r.timing_fallback,
        "graph_calls": r.timing.calls if r.timing else None,
        "candidate_replay_spread": r.timing.spread if r.timing else None,
        "reference_replay_spread": r.reference_timing.spread if r.reference_timing else None,
        "judge_timing": jt.model_dump() if jt else None,
        "baseline_cached": r.baseline_cached,
        "baseline_unsteady": r.baseline_unsteady,
        "floor_ms": r.floor_ms,
        "error": (r.error or "")[:600] or None,
        "eval_s": r.stages.total,
        "wall_s": wall_s,
    }


def run_verdicts(pool: Pool, report: Report, pair: Pair, task: Task, source: str, opts: EvalOptions, n: int) -> list:
    rows = []
    for i in range(n):
        t0 = time.monotonic()
        try:
            r = pool.evaluate(task, source, opts)
        except Exception as exc:  # noqa: BLE001 - a verdict that did not come back is a row, not the end
            why = (
                f"none within {VERDICT_TIMEOUT_S:.0f} s, the pool was started anew"
                if isinstance(exc, TimeoutError)
                else ""
            )
            rows.append({"status": "no_verdict", "error": why or f"{type(exc).__name__}: {exc}"[:600]})
            print(f"  {pair.name} l2={opts.l2} {i + 1}/{n}: no verdict: {rows[-1]['error']}", flush=True)
            continue
        report.verdict(pair.name, opts.l2, i, r)
        row = verdict_row(r, time.monotonic() - t0)
        rows.append(row)
        jt = row["judge_timing"] or {}
        print(
            f"  {pair.name} l2={opts.l2} {i + 1}/{n}: {row['status']} cand {_us(row['candidate_ms'])} "
            f"ref {_us(row['reference_ms'])} speedup {_x(row['speedup'])} eager {_x(row['eager_speedup'])} "
            f"judge {_us(jt.get('per_call_ms'))} ({jt.get('regime')}) {row['timing_method']} "
            f"{' '.join(row['flags'])} {row['wall_s']:.1f} s" + (f" | {row['error'][:200]}" if row["error"] else ""),
            flush=True,
        )
    return rows


def spread(values) -> dict | None:
    xs = [float(v) for v in values if v is not None and v > 0]
    if not xs:
        return None
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "max_over_min": max(xs) / min(xs),
    }


def summarize(rows: list[dict]) -> dict:
    """Over the correct verdicts: each figure's median, min, max and max/min."""
    ok = [r for r in rows if r.get("status") == "correct"]
    return {
        "verdicts": len(rows),
        "correct": len(ok),
        "successes": sum(bool(r.get("success")) for r in rows),
        "statuses": sorted({r.get("status") for r in rows}),
        "flags": sorted({f for r in rows for f in r.get("flags") or []}),
        "methods": sorted({r["timing_method"] for r in ok if r.get("timing_method")}),
        "fallbacks": sorted({r["timing_fallback"] for r in ok if r.get("timing_fallback")}),
        "candidate_ms": spread(r["candidate_ms"] for r in ok),
        "reference_ms": spread(r["reference_ms"] for r in ok),
        "speedup": spread(r["speedup"] for r in ok),
        "eager_ms": spread(r["eager_ms"] for r in ok),
        "eager_speedup": spread(r["eager_speedup"] for r in ok),
        "judge_per_call_ms": spread((r.get("judge_timing") or {}).get("per_call_ms") for r in ok),
        "judge_regimes": sorted({(r.get("judge_timing") or {}).get("regime") or "-" for r in ok}),
    }


def _options(device: str, l2: str) -> EvalOptions:
    return EvalOptions(device=device, use_baseline_cache=False, reuse_baselines=False, compile_baseline=False, l2=l2)


def agreement(cold: dict, warm: dict, independent: dict) -> dict:
    """The median verdict over the independent timer of the same L2 mode, per side (1.0: agree)."""
    out = {}
    for side, key in (("candidate", "candidate_ms"), ("reference", "reference_ms")):
        timers = independent.get(side) or {}
        for mode, summary, timer in (("cold", cold, "cold"), ("warm", warm, "warm")):
            figure, ref = summary.get(key), (timers.get(timer) or {}).get("ms")
            ok = figure is not None and ref is not None and ref > 0
            out[f"{side}_{mode}"] = figure["median"] / ref if ok else None
    return out


def run_pair(pool: Pool, report: Report, pair: Pair, args, workdir: Path) -> dict:
    t0 = time.monotonic()
    source = pair.task_source(args.device)
    task = Task.from_source(source, name=pair.name, path=str(pair.task))
    candidate = pair.candidate.read_text(encoding="utf-8")
    print(f"{pair.name}: {pair.task.relative_to(ROOT)} + {pair.candidate.relative_to(ROOT)}", flush=True)
    n_cold, n_warm = (args.evals, args.warm_evals) if pair.kind == "microsecond" else (args.kb_evals, 0)
    cold = run_verdicts(pool, report, pair, task, candidate, _options(args.device, "cold"), n_cold)
    warm = run_verdicts(pool, report, pair, task, candidate, _options(args.device, "warm"), n_warm)
    row: dict = {
        "kernel": pair.name,
        "task": str(pair.task.relative_to(ROOT)),
        "constants": pair.constants,  # what the pair set in the task file (its sizes, its dtype)
        "candidate": str(pair.candidate.relative_to(ROOT)),
        "cold": summarize(cold),
        "warm": summarize(warm) if warm else None,
    }
    if pair.kind != "microsecond":
        row["independent"] = {"skipped": "not run for KernelBench's tasks (spread and speedups only)"}
    else:
        from timing_independent import independent_timers

        try:
            row["independent"] = independent_timers(source, candidate, pair.name, workdir, args.device)
        except Exception as exc:  # noqa: BLE001 - the verdicts stand without it
            row["independent"] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        print(f"  {pair.name} independent: {json.dumps(row['independent'])[:400]}", flush=True)
    row["agreement"] = agreement(row["cold"], row["warm"] or {}, row["independent"])
    row["cold_verdicts"], row["warm_verdicts"] = cold, warm
    row["seconds"] = time.monotonic() - t0
    return row


# -- the CLI, as a user runs it --------------------------------------------------------------------


def cli_runs(args) -> dict:
    cmd = [sys.executable, "-m", "kernelsmith.cli", "eval", *CLI_PAIR, "--json"]
    if args.device != "cuda":
        cmd += ["--device", args.device]
    runs = []
    for i in range(args.cli_runs):
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            runs.append({"error": f"no verdict within {CLI_TIMEOUT_S:.0f} s", "wall_s": time.monotonic() - t0})
            continue
        wall = time.monotonic() - t0
        lines = proc.stdout.strip().splitlines()
        try:
            rec = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            runs.append({"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}", "wall_s": wall})
            continue
        keep = ("status", "success", "speedup", "candidate_ms", "reference_ms", "eager_speedup", "timing_method")
        runs.append({**{k: rec.get(k) for k in keep}, "baseline_cached": rec.get("baseline_cached"), "wall_s": wall})
        print(f"cli run {i + 1}/{args.cli_runs}: {json.dumps(runs[-1])}", flush=True)
    speedups = [r["speedup"] for r in runs if r.get("speedup")]
    med = statistics.median(speedups) if speedups else None
    worst = max(abs(s / med - 1) for s in speedups) if med else None
    return {
        "command": "kernelsmith eval " + " ".join(cmd[4:]) + f"  (run as {Path(cmd[0]).name} -m kernelsmith.cli)",
        "runs": runs,
        "speedup": spread(speedups),
        "max_deviation_from_median": worst,
        "within_3_percent": worst is not None and len(speedups) == args.cli_runs and worst <= 0.03,
    }


# -- the run ------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, fewer verdicts")
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds; no kernel starts that would end later")
    ap.add_argument("--evals", type=int, default=None, help="L2-cold verdicts per pair (default 6; quick 2)")
    ap.add_argument("--warm-evals", type=int, default=None, help="L2-warm verdicts per pair (default 1; quick 1)")
    ap.add_argument("--kb-evals", type=int, default=None, help="verdicts per KernelBench task (default 2; quick 2)")
    ap.add_argument("--cli-runs", type=int, default=None, help="kernelsmith eval subprocesses (default 3; quick 2)")
    ap.add_argument("--only", default=None, help="comma-separated kernel names of PLAN, without the CLI runs")
    ap.add_argument("--no-cli", action="store_true", help="without the kernelsmith eval subprocesses")
    args = ap.parse_args(argv)
    for name, full, quick in (("evals", 6, 2), ("warm_evals", 1, 1), ("kb_evals", 2, 2), ("cli_runs", 3, 2)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def selected(args) -> list[Pair]:
    names = set(args.only.split(",")) if args.only else set(QUICK) if args.quick else None
    return [p for p in PLAN if names is None or p.name in names]


def machine(args) -> dict:
    import torch

    info: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "torch": torch.__version__}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    try:  # the device machine's copy of the tree may have no .git, or no git
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        info["commit"] = rev.stdout.strip() or None
    except OSError:
        info["commit"] = None
    return info


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.device != "cuda":  # this process runs the candidates' kernels too: in Triton's interpreter,
        os.environ["TRITON_INTERPRET"] = "1"  # which Triton reads before the first kernel is defined
    schedule = Schedule(args.deadline)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verdicts.jsonl").write_text("")
    # A fresh cache for everything this run starts: the CLI's first run times its baselines, the pool's
    # verdicts neither read nor write it.
    os.environ["KERNELSMITH_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-timing-cache-")
    workdir = Path(tempfile.mkdtemp(prefix="ks-timing-modules-"))
    plan = selected(args)
    meta = {
        **machine(args),
        "argv": sys.argv[1:] if argv is None else list(argv),
        "device": args.device,
        "evals": args.evals,
        "warm_evals": args.warm_evals,
        "kb_evals": args.kb_evals,
        "cli_runs": args.cli_runs,
        "deadline_s": args.deadline,
        "verdict_options": _options(args.device, "cold").model_dump(exclude={"l2"}),
    }
    report = Report(args.out, meta)
    report.save()
    if not args.no_cli and args.cli_runs > 0 and not args.only:
        report.cli = cli_runs(args)
        report.save()
    pool = Pool(args.device)
    try:
        try:  # starts the judge and its sandboxes, and measures the ceilings, before the first verdict
            report.meta["hardware"] = pool.get().hardware().result(timeout=VERDICT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the verdicts say what is wrong, kernel by kernel
            report.meta["hardware"] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
            pool.close(wait=0)
        for pair in plan:
            verdicts = args.evals + args.warm_evals if pair.kind == "microsecond" else args.kb_evals
            why = schedule.why_not(pair.kind, verdicts)
            if why:
                report.skipped.append({"kernel": pair.name, "why": why})
                print(f"{pair.name}: skipped ({why})", flush=True)
                continue
            t0 = time.monotonic()
            row = run_pair(pool, report, pair, args, workdir)
            (report.pairs if pair.kind == "microsecond" else report.kernelbench).append(row)
            schedule.record(pair.kind, time.monotonic() - t0, verdicts)
            report.save()
    finally:
        pool.close(wait=None)
        report.meta["wall_s"] = schedule.elapsed()
        report.save()
    text = table(report.pairs, report.kernelbench, report.cli, report.skipped, args.device)
    (args.out / "table.txt").write_text(text + "\n")
    print(text, flush=True)


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.4g} us"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}x"


if __name__ == "__main__":
    main()
