"""The proof's step 3: models no one here wrote, as a user gets them (benchmarks/device/models/), one
device call each. `kernelsmith capture` on the GPU; `kernelsmith seed` on every task that is not a
library op (GEMMs, convolutions, attention, embeddings: kernelsmith/capture/regions.py's LIBRARY_OPS),
the seeds derived in parallel on the host's CPUs; the seeded tasks tuned by `kernelsmith evolve-suite
--mutator tune` (one warm evaluation pool, the heaviest task first, until the time for apply is
reached); `kernelsmith apply` of every run in eager and compile modes. Returned: capture.json,
apply.json, steps.log (every command's output) and summary.md (the tasks, their seeds and tuned
speedups, the regions each kernel took, the outputs, the step's time before and after per mode).

A dry run (CPU) captures the model's tiny variant and tries two seeds, which say that they need a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from apply_summary import summary_lines
from proof_core import Ctx, Outcome, run_logged, tail

ITERATIONS = 4  # tuner iterations per task (a retry: 2)
APPLY_RESERVE = 240.0  # seconds kept for apply when the tuning starts (a retry: 330)
KS = ["-m", "kernelsmith"]
MODELS_FILE = "benchmarks/device/models"


@dataclass(frozen=True)
class Model:
    name: str
    title: str
    entry: str
    tiny: str
    needs: str  # the package it comes from: the step is skipped where it is not installed


MODELS = [
    Model(
        "gpt2",
        "GPT-2 (transformers, GPT-2 small widths, 6 layers, fp32, 8 x 128 tokens)",
        f"{MODELS_FILE}/transformers_models.py:gpt2",
        f"{MODELS_FILE}/transformers_models.py:tiny_gpt2",
        "transformers",
    ),
    Model(
        "bert",
        "BERT (transformers, BERT-base widths, 6 layers, fp32, 8 x 128 tokens, padded)",
        f"{MODELS_FILE}/transformers_models.py:bert",
        f"{MODELS_FILE}/transformers_models.py:tiny_bert",
        "transformers",
    ),
    Model(
        "resnet18",
        "ResNet-18 (torchvision, fp32, 8 x 3 x 224 x 224)",
        f"{MODELS_FILE}/torchvision_models.py:resnet18",
        f"{MODELS_FILE}/torchvision_models.py:tiny_resnet18",
        "torchvision",
    ),
    Model(
        "convnext-tiny",
        "ConvNeXt-tiny (torchvision, fp32, 8 x 3 x 224 x 224)",
        f"{MODELS_FILE}/torchvision_models.py:convnext_tiny",
        f"{MODELS_FILE}/torchvision_models.py:tiny_convnext_tiny",
        "torchvision",
    ),
]


def is_library(task: dict) -> bool:
    from kernelsmith.capture.regions import LIBRARY_OPS

    packets = [op.split(".")[0] for op in task.get("ops", [])]
    return any(p in LIBRARY_OPS or p.startswith("_scaled_dot_product") for p in packets)


def written_tasks(capture: dict) -> list[dict]:
    """The tasks capture wrote, heaviest first."""
    return sorted((t for t in capture.get("tasks", []) if t.get("file")), key=lambda t: -t.get("share", 0.0))


def derive_seeds(ctx: Ctx, tasks: list[dict], cap: Path, seeds: Path, log: Path, limit: float) -> dict[str, str]:
    """`kernelsmith seed` on each task at once (Inductor's compile is CPU work): name -> "ok" or why not.
    Each seed's output is appended to `log` when all are done."""
    cpus = ctx.machine.get("cpus") or 2
    jobs = max(1, min(len(tasks), cpus // 2))
    env = ctx.env(TORCHINDUCTOR_COMPILE_THREADS=str(max(1, cpus // jobs)))
    seeds.mkdir(parents=True, exist_ok=True)

    def one(t: dict) -> tuple[str, str]:
        name = t["name"]
        ran = run_logged(
            [ctx.python, *KS, "seed", str(cap / t["file"]), "--out", str(seeds / t["file"])],
            seeds / f"{name}.log",
            limit,
            env,
        )
        if ran.rc == 0 and (seeds / t["file"]).is_file():
            return name, "ok"
        last = tail(ran.log, 1).strip()
        return name, ("over the time limit" if ran.rc is None else last[:200] or f"exit {ran.rc}")

    with ThreadPoolExecutor(jobs) as pool:
        said = dict(pool.map(one, tasks))
    with log.open("a") as sink:
        for t in tasks:
            sink.write((seeds / f"{t['name']}.log").read_text(errors="replace"))
    return said


def tune(ctx: Ctx, tasks: list[dict], cap: Path, seeds: Path, work: Path, log: Path, limit: float) -> dict[str, Path]:
    """evolve-suite over the seeded tasks, heaviest first (file names keep the order; apply matches a
    run by the `Region:` line of its task, not the name): name -> its run directory."""
    suite, suite_seeds, runs = work / "suite", work / "suite_seeds", work / "runs"
    for d in (suite, suite_seeds):
        d.mkdir(parents=True, exist_ok=True)
    named = {}
    for i, t in enumerate(tasks):
        f = f"{i:02d}_{t['file']}"
        shutil.copyfile(cap / t["file"], suite / f)
        shutil.copyfile(seeds / t["file"], suite_seeds / f)
        named[t["name"]] = runs / Path(f).stem
    iterations = ITERATIONS if ctx.attempt == 1 else 2
    cmd = [
        ctx.python,
        *KS,
        "evolve-suite",
        str(suite),
        "--seeds",
        str(suite_seeds),
        "--mutator",
        "tune",
        "--iterations",
        str(iterations),
        "--device",
        ctx.device,
        "--runs-dir",
        str(runs),
        "--quiet",
    ]
    run_logged(cmd, log, limit, ctx.env())
    from kernelsmith.evolve.store import holds_run  # a run killed at the deadline keeps what it stored

    return {name: run for name, run in named.items() if holds_run(run)}


def best_of(run: Path) -> str:
    try:
        best = json.loads((run / "summary.json").read_text())["best"] or {}
    except (OSError, ValueError, KeyError):
        return "stopped before its summary (the store has what ran)"
    if not best.get("success"):
        return f"no success ({best.get('status', '-')})"
    vs_c = best.get("speedup_vs_compile")
    return f"{best.get('speedup') or 0:.3g}x eager, {vs_c or 0:.3g}x torch.compile (iteration {best.get('iteration')})"


def table(tasks: list[dict], seeded: dict[str, str], runs: dict[str, Path]) -> str:
    lines = ["| task | share | library | seed | tuned best |", "|---|---|---|---|---|"]
    for t in tasks:
        lib = is_library(t)
        seed = "-" if lib else seeded.get(t["name"], "not tried")
        best = best_of(runs[t["name"]]) if t["name"] in runs else "-"
        lines.append(
            f"| {t['name']} | {t.get('share', 0):.1%} | {'yes' if lib else 'no'} | {seed.replace('|', '/')} | {best} |"
        )
    return "\n".join(lines) + "\n"


def step(model: Model) -> Callable[[Ctx], Outcome]:
    def run(ctx: Ctx) -> Outcome:
        if importlib.util.find_spec(model.needs) is None:
            note = f"{model.needs} is not installed on this machine: {model.name} skipped"
            return Outcome("skipped", note, note + ".")
        return run_model(ctx, model)

    return run


def run_model(ctx: Ctx, model: Model) -> Outcome:
    name = f"model-{model.name}"
    work, out = ctx.step_work(name), ctx.step_out(name)
    log, cap = out / "steps.log", work / "capture"
    entry = model.tiny if ctx.dry_run else model.entry
    ran = run_logged(
        [ctx.python, *KS, "capture", entry, "--out", str(cap), "--device", ctx.device],
        log,
        min(180.0, ctx.left() - 60),
        ctx.env(),
    )
    if ran.rc != 0 or not (cap / "capture.json").is_file():
        why = tail(log, 3)
        return Outcome(
            "timeout" if ran.rc is None else "done",
            f"capture failed: {why.splitlines()[-1][:160] if why else '?'}",
            f"`kernelsmith capture {entry}` failed:\n\n```\n{why}\n```\n",
        )
    shutil.copyfile(cap / "capture.json", out / "capture.json")
    capture = json.loads((cap / "capture.json").read_text())
    tasks = written_tasks(capture)
    own = [t for t in tasks if not is_library(t)]
    reserve = APPLY_RESERVE if ctx.attempt == 1 else 330.0
    seeded = derive_seeds(
        ctx, own[:2] if ctx.dry_run else own, cap, work / "seeds", log, max(30.0, min(200.0, ctx.left() - reserve - 60))
    )
    ok = [t for t in own if seeded.get(t["name"]) == "ok"]
    runs = tune(ctx, ok, cap, work / "seeds", work, log, ctx.left() - reserve) if ok else {}
    lines = [f"capture: {len(tasks)} tasks ({len(own)} not library ops), forward {_wall(capture)}"]
    if runs:
        ran = run_logged(
            [
                ctx.python,
                *KS,
                "apply",
                *map(str, runs.values()),
                "--capture",
                str(cap),
                "--out",
                str(work / "patch"),
                "--device",
                ctx.device,
                "--reps",
                "20",
                "--min-speedup",
                "1",
                "--mode",
                "eager",
                "--mode",
                "compile",
            ],
            log,
            ctx.left() - 10,
            ctx.env(),
        )
        applied = work / "patch" / "apply.json"
        if applied.is_file():
            shutil.copyfile(applied, out / "apply.json")
            lines += summary_lines(json.loads(applied.read_text()), model.name)
        lines.append(
            f"apply: {'killed at the time limit' if ran.rc is None else f'exit {ran.rc}'}: {tail(log, 1)[:200]}"
        )
    else:
        lines.append("apply: not run (no task was seeded and tuned)")
    status = "timeout" if runs and ran.rc is None else "skipped" if ctx.dry_run and not runs else "done"
    body = f"Entry `{entry}`.\n\n" + table(tasks, seeded, runs) + "\n```\n" + "\n".join(lines) + "\n```\n"
    return Outcome(status, f"{len(ok)}/{len(own)} seeded, {len(runs)} tuned; {lines[-1][:150]}", body)


def _wall(capture: dict) -> str:
    w = capture.get("wall_ms") or {}
    return f"{w.get('median', 0):.4g} ms wall ({w.get('low', 0):.4g}-{w.get('high', 0):.4g}) on {capture.get('device')}"
