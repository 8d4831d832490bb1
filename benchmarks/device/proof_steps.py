"""The proof's steps, in priority order (STEPS), and those that run an existing device script whole:
the gate (benchmarks/device/eval.sh, one phase each), the Llama decode step
(benchmarks/device/patch_modes.sh, one batch each) and issue 28's microsecond table
(benchmarks/device/timing.sh). The models (proof_models.py) and KernelBench (proof_kb.py) steps are
written here in Python. Each step's run(ctx) writes its files under ctx.step_out(name) and returns an
Outcome; a dry run (ctx.dry_run, on the CPU) runs what the CPU can at tiny sizes or says why not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import proof_kb
import proof_models
from proof_core import Ctx, Outcome, copy_text, run_logged, tail

KEEP = 25.0  # seconds a script's step leaves for the driver after the script is killed

# The scripts the steps run, from the repo root (tests/benchmarks/test_proof_runner.py checks that each is there).
GATE_SH = "benchmarks/device/eval.sh"
PATCH_MODES_SH = "benchmarks/device/patch_modes.sh"
TIMING_SH = "benchmarks/device/timing.sh"
TIMING_PY = "benchmarks/timing_gpu.py"  # what timing.sh runs; a dry run calls it directly, on the CPU
SCRIPTS = (GATE_SH, PATCH_MODES_SH, TIMING_SH, TIMING_PY, proof_kb.SEED_PY, proof_models.MODELS_FILE)


@dataclass
class Step:
    name: str
    title: str
    minutes: str  # estimated device time in all, for the plan ("8", "25-30: 3 calls")
    need_s: float  # seconds this call must have left to start it
    max_files: int  # the most files it returns in one call (summary.md included)
    run: Callable[[Ctx], Outcome]
    waits: Callable[[Ctx], str | None] | None = None  # why it cannot run in this call (it waits for another)


def needs_cuda(ctx: Ctx, what: str) -> Outcome | None:
    if ctx.dry_run:
        return Outcome("skipped", f"dry run: {what} needs a CUDA GPU", f"Not run: {what} needs a CUDA GPU (dry run).")
    return None


def script_status(rc: int | None) -> str:
    return "timeout" if rc is None else "done"


# ---- 1. the gate --------------------------------------------------------------------------------


def _last_match(text: str, pattern: str) -> str:
    found = re.findall(pattern, text, flags=re.M)
    return found[-1] if found else ""


def gate_pytest(ctx: Ctx) -> Outcome:
    if skip := needs_cuda(ctx, "`pytest -m cuda`"):
        return skip
    work, out = ctx.step_work("gate-pytest"), ctx.step_out("gate-pytest")
    ran = run_logged(
        ["bash", GATE_SH],
        work / "run.log",
        ctx.left() - KEEP,
        ctx.env(KS_GATE_PHASE="pytest", OUT=str(work)),
    )
    copy_text(work / "pytest_cuda.log", out / "pytest_cuda.log") or copy_text(work / "run.log", out / "pytest_cuda.log")
    log = (out / "pytest_cuda.log").read_text() if (out / "pytest_cuda.log").is_file() else ""
    counts = _last_match(log, r"^=*\s*(\d+ (?:passed|failed).*?)(?: in [\d.]+s.*)?=*$") or "no result line"
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", log, flags=re.M)
    body = f"`pytest -m cuda` ({GATE_SH}, KS_GATE_PHASE=pytest): **{counts}**\n"
    body += "".join(f"- {f}\n" for f in failed)
    return Outcome(script_status(ran.rc), f"pytest -m cuda: {counts}", body)


def gate_verdicts(ctx: Ctx) -> Outcome:
    if skip := needs_cuda(ctx, "the verdict gate"):
        return skip
    work, out = ctx.step_work("gate-verdicts"), ctx.step_out("gate-verdicts")
    ran = run_logged(
        ["bash", GATE_SH],
        work / "run.log",
        ctx.left() - KEEP,
        ctx.env(KS_GATE_PHASE="gate", OUT=str(work)),
    )
    copy_text(work / "gate.log", out / "gate.log") or copy_text(work / "run.log", out / "gate.log")
    copy_text(work / "doctor.log", out / "doctor.log")
    if (work / "redteam_cuda.json").is_file():
        (out / "redteam_cuda.json").write_bytes((work / "redteam_cuda.json").read_bytes())
    gate = (out / "gate.log").read_text() if (out / "gate.log").is_file() else ""
    verdict = _last_match(gate, r"^gate: (.*)$") or "no gate line (see gate.log)"
    bad = [ln.strip() for ln in gate.splitlines() if ln.strip() and not ln.startswith(("ok ", "median", "gate:"))]
    body = f"The verdict gate (benchmarks/device/redteam_cuda.py, red-team and KernelBench cases): **{verdict}**\n"
    body += "".join(f"- `{ln[:160]}`\n" for ln in bad[:12])
    body += f"\nDoctor (`checkup('cuda')`): {_doctor(out / 'doctor.log')}\n"
    return Outcome(script_status(ran.rc), f"gate: {verdict}", body)


def _doctor(path: Path) -> str:
    try:
        text = path.read_text()
        guarantees = json.loads(text[text.index("{") :])["guarantees"]
    except (OSError, ValueError, KeyError):
        return "no readable result (see doctor.log)"
    broken = [k for k, v in guarantees.items() if v != "holds"]
    return (
        "all five guarantees hold"
        if not broken
        else f"not holding: {', '.join(f'{k} ({guarantees[k]})' for k in broken)}"
    )


# ---- 2. the Llama decode step -------------------------------------------------------------------


def llama(batch: int) -> Callable[[Ctx], Outcome]:
    name = f"llama-b{batch}"

    def run(ctx: Ctx) -> Outcome:
        if skip := needs_cuda(ctx, "the Llama decode step at Llama-3-8B widths (bf16)"):
            return skip
        work, out = ctx.step_work(name), ctx.step_out(name)
        limit = ctx.left() - KEEP
        env = ctx.env(OUT=str(work), DEADLINE=str(int(limit - 10)), TUNE_LIMIT="60")
        ran = run_logged(["bash", PATCH_MODES_SH, str(batch)], out / "run.log", limit, env)
        logs = [work / f"{k}_b{batch}.log" for k in ("capture", "tune", "apply")]
        (out / "steps.log").write_text(
            "".join(f"## {p.name}\n{p.read_text(errors='replace')}\n" for p in logs if p.is_file())
        )
        if (work / f"apply_b{batch}.json").is_file():
            (out / "apply.json").write_bytes((work / f"apply_b{batch}.json").read_bytes())
        summary = tail(work / f"summary_b{batch}.log", 40) or "apply wrote no summary (see run.log)"
        tune = tail(work / f"tune_b{batch}.log", 20)
        body = (
            f"`benchmarks/device/patch_modes.sh {batch}` (ITERS=6, REPS=20, MIN=1, modes eager, compile, graphs; "
            f"TUNE_LIMIT=60 s per seed):\n\n```\n{summary}\n```\n\n"
            f"Tuning (each seed's last lines):\n\n```\n{tune}\n```\n"
        )
        body += _kernels_line(out / "apply.json")
        first = summary.splitlines()[0] if summary else ""
        # no apply.json: the step proved nothing (a tool missing on the card, a crash), so it is retried
        status = script_status(ran.rc) if (out / "apply.json").is_file() else "error"
        return Outcome(status, first[:200] or "no summary", body)

    return run


def _kernels_line(applied: Path) -> str:
    """Each kernel's verdict and the search iteration that made it (0: the seed as written, the tuner's
    time ran out before it tried anything: seen on 2026-12-06 at 60 s a seed)."""
    try:
        kernels = json.loads(applied.read_text())["kernels"]
    except (OSError, ValueError, KeyError):
        return ""
    rows = [
        f"| {k['name']} | {k.get('speedup') or 0:.3g}x | {k.get('iteration')} | {k.get('why') or 'in the patch'} |"
        for k in kernels
    ]
    head = (
        "\nKernels (iteration 0: the seed as written, untuned):\n\n"
        "| kernel | verdict | iteration | |\n| --- | --- | --- | --- |\n"
    )
    return head + "\n".join(rows) + "\n"


# ---- 5. issue 28's microsecond table ------------------------------------------------------------


def timing(ctx: Ctx) -> Outcome:
    """benchmarks/device/timing.sh as the call's time allows; the kernels its deadline skipped run in the
    next call (`--only` them, without the CLI runs), as part 2, 3, ...: each part's files carry its number."""
    work, out, before = ctx.step_work("timing"), ctx.step_out("timing"), ctx.step_results("timing")
    parts = sorted(before.glob("timing_gpu_part*.json"))
    part, only = len(parts) + 1, []
    if parts:
        only = [s["kernel"] for s in json.loads(parts[-1].read_text()).get("skipped", [])]
    limit = ctx.left() - KEEP
    if ctx.dry_run:
        cmd = [ctx.python, TIMING_PY, "--device", "cpu", "--quick", "--out", str(work)]
    else:
        cmd = ["bash", TIMING_SH, "--deadline", str(int(limit - 70))]
    cmd += ["--only", ",".join(only), "--no-cli"] if only else []
    ran = run_logged(cmd, out / f"run_part{part}.log", limit, ctx.env(OUT=str(work)))
    for src, dst in (("timing_gpu.json", "timing_gpu"), ("verdicts.jsonl", "verdicts"), ("table.txt", "table")):
        if (work / src).is_file():
            (out / f"{dst}_part{part}{Path(src).suffix}").write_bytes((work / src).read_bytes())
    try:
        report = json.loads((work / "timing_gpu.json").read_text())
    except (OSError, ValueError):
        return Outcome(script_status(ran.rc), f"part {part}: no timing_gpu.json", _timing_body(before, out, part))
    measured = len(report.get("pairs", [])) + len(report.get("kernelbench", []))
    skipped = [s["kernel"] for s in report.get("skipped", [])]
    status = "partial" if skipped else "done"
    note = f"part {part}: {measured} kernels measured" + (f", {len(skipped)} left for the next call" if skipped else "")
    return Outcome(status, note, _timing_body(before, out, part), new_rows=measured)


def _timing_body(before: Path, out: Path, part: int) -> str:
    """Every part's table so far, each under the card and date it was measured on."""
    what = "`bash benchmarks/device/timing.sh` (benchmarks/timing_gpu.py; a part after the first: the kernels the "
    what += "deadline skipped, `--only` them, no CLI runs)"
    body = [what + "\n"]
    for n in range(1, part + 1):
        folder = out if n == part else before
        try:
            meta = json.loads((folder / f"timing_gpu_part{n}.json").read_text())["meta"]
            table = (folder / f"table_part{n}.txt").read_text().strip()
        except (OSError, ValueError, KeyError):
            body.append(f"Part {n}: no table (see run_part{n}.log).\n")
            continue
        card = meta.get("gpu") or (meta.get("hardware") or {}).get("name") or meta.get("device")
        body.append(f"Part {n} ({meta.get('date')}, {card}, torch {meta.get('torch')}):\n\n```\n{table}\n```\n")
    return "\n".join(body)


def kernelbench_missing(ctx: Ctx) -> str | None:
    if ctx.dry_run or (ctx.kernelbench / "level1").is_dir():
        return None
    fetch = "benchmarks/kernelbench/fetch_problems.sh"
    return f"no KernelBench problems at {ctx.kernelbench}: run {fetch} here and carry .kernelbench"


LLAMA = "Llama decode step, batch {}: capture, seeds, tune, apply (eager, compile, graphs)"
MODEL = "{}: capture, seed, tune, apply (eager, compile)"
KB_SEEDS = "Seeds on every second KernelBench L1+L2 problem (100)"
KB_TUNE = "20 tuner iterations from the seeds of every tenth problem (20)"

# need_s: the seconds a call must have left to start the step (a step started first in a call gets
# the whole budget, ~540 s); max_files: the most files it returns in one call, summary.md included.
STEPS: list[Step] = [
    Step("gate-pytest", "Gate: pytest -m cuda on main", minutes="4", need_s=240, max_files=2, run=gate_pytest),
    Step("gate-verdicts", "Gate: the verdict gate and the doctor", minutes="4", need_s=300, max_files=4,
         run=gate_verdicts),
    Step("llama-b1", LLAMA.format(1), minutes="9", need_s=480, max_files=4, run=llama(1)),
    Step("llama-b32", LLAMA.format(32), minutes="9", need_s=480, max_files=4, run=llama(32)),
    *[
        Step(f"model-{m.name}", MODEL.format(m.title), minutes="9", need_s=420, max_files=4, run=proof_models.step(m))
        for m in proof_models.MODELS
    ],
    Step("kb-seeds", KB_SEEDS, minutes="25-30: 3-4 calls", need_s=150, max_files=5, run=proof_kb.seeds,
         waits=kernelbench_missing),
    Step("kb-tune", KB_TUNE, minutes="60-70: 7-9 calls", need_s=200, max_files=4, run=proof_kb.tune,
         waits=kernelbench_missing),
    Step("timing", "Issue 28's microsecond table (six evaluations per kernel)", minutes="9-12: 1-2 calls", need_s=480,
         max_files=5, run=timing),
]  # fmt: skip
