"""`kernelsmith apply`: the best kernels of search runs on captured tasks, written as a patch for the
captured model (a folder importable as a package, torch only), then checked end to end (e2e.py).

Each RUN_DIR must be a run on one of the capture's tasks: the run stores its task's text, whose
`Region:` line names the region it was captured from (a re-capture keeps it), or else equals the
file's. Its best program is the store's best (a success: correct and unflagged, the one rule); a run
with none, or whose best is slower than --min-speedup (1.0: faster than the reference), is listed and
left out.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.apply.options import MODES
from kernelsmith.capture.outdir import prepare
from kernelsmith.capture.run import MANIFEST as CAPTURE_MANIFEST
from kernelsmith.capture.task_file import region_of
from kernelsmith.errors import UserError
from kernelsmith.evaluate.measuring.noise import speedup_noise
from kernelsmith.evolve.store import RunStore

PATCH_MANIFEST = "patch.json"
# What a patch holds of kernelsmith: the runtime folder, every module of it (kernelsmith/patch/, which imports
# nothing else of kernelsmith: an import contract holds it). A patch written before the runtime had its
# folder may hold patch_runtime.py: rewriting it replaces that too.
RUNTIME_DIR = Path(__file__).resolve().parents[1] / "patch"
_EARLIER_RUNTIME = {"patch_runtime.py"}


def runtime_files() -> list[str]:
    """The runtime's modules, each copied into every patch."""
    return sorted(p.name for p in RUNTIME_DIR.glob("*.py") if p.name != "__init__.py")


INIT = '''"""Kernels for {entry}, written by `kernelsmith apply` (patch.json lists them; its "check" says
whether they passed the end-to-end check, apply.json how: apply() warns when they did not; "served" says
which kernels serve each mode, eager, compile and graphs: apply() warns when none serves any).

    import {package}
    patch = {package}.apply(model)   # the model now runs these kernels; patch.remove() undoes it
    with torch.no_grad():            # or torch.inference_mode()
        out = model(*inputs)

The kernels have no backward, and a patch never changes gradients: where autograd records a region
(grad enabled and an input or parameter of the region requires grad) the model's own ops run there,
counted in patch.counts[name].autograd and said once in a warning. The kernels serve under
torch.no_grad(), torch.inference_mode(), or where nothing the region reads requires grad.

On the CPU, Triton kernels run only in Triton's interpreter: apply() sets TRITON_INTERPRET=1 when
triton is not imported yet or torch sees no GPU; otherwise it asks for it (set it before anything
imports triton).
"""

import json
import warnings
from pathlib import Path

from .install import install


def apply(model, device=None):
    here = Path(__file__).parent
    spec = json.loads((here / "patch.json").read_text(encoding="utf-8"))
    check = spec.get("check") or {{}}
    if not check.get("passed"):
        why = check.get("reason") or "it was not checked"
        warnings.warn(f"{{here.name}}: FAILED kernelsmith apply's end-to-end check: {{why}} (apply.json says more)")
    elif spec.get("served") and not any(k.get("modes") for k in spec["kernels"]):
        said = "; ".join(spec["served"].values())
        warnings.warn(f"{{here.name}}: serves no mode, the model runs as it was: {{said}}")
    return install(model, here, device)
'''


@dataclass
class Chosen:
    """One run's part in the patch: its task, its best kernel, or why it is left out."""

    run_dir: str
    name: str  # the task's stem in the capture
    share: float  # of the captured forward's time
    calls: int  # per forward, as captured
    speedup: float | None  # the kernel's verdict speedup over the task's reference
    program: int | None  # the best program's id in the run's store (as `runs`, best.py and summary.json name it)
    why: str | None = None  # None: in the patch
    iteration: int | None = None  # the search iteration that made it
    noise: float = 0.0  # the relative noise of its verdict speedup (evaluate/measuring/noise.py)
    speedup_vs_compile: float | None = None  # its verdict against torch.compile of the task (None: not measured)
    compile_why: str | None = None  # None: compiled graphs take it too; else why torch.compile keeps its own code
    # The modes it serves (eager, compile, graphs: patch.json's `modes`), as apply's check left them (serving.py),
    # and why not each other mode; before the check (or with --no-check), by its verdicts (verdict_modes)
    modes: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)


def verdict_modes(c: Chosen) -> list[str]:
    """The modes a kernel serves by its verdicts alone: eager, and the compiled modes unless its verdict
    loses to torch.compile's own code (as the runtime reads a patch written before `modes`)."""
    return ["eager"] if c.compile_why else list(MODES)


def read_capture(capture_dir: Path) -> dict:
    path = capture_dir / CAPTURE_MANIFEST
    if not path.is_file():
        raise UserError(f"--capture {capture_dir}: no {CAPTURE_MANIFEST} (not a folder `kernelsmith capture` wrote)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        ok = isinstance(manifest.get("entry"), str) and isinstance(manifest.get("tasks"), list)
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        raise UserError(f"--capture {capture_dir}: {CAPTURE_MANIFEST} is not a capture's")
    return manifest


def _same_text(a: str, b: str) -> bool:
    norm = lambda s: s.lstrip("\ufeff").replace("\r\n", "\n").strip()
    return norm(a) == norm(b)


def choose(
    run_dirs: list[Path], capture_dir: Path, manifest: dict, min_speedup: float = 1.0
) -> list[tuple[Chosen, str | None, dict]]:
    """(what each run gives, its best kernel's code or None, its capture task) in the capture's rank order."""
    written = {t["file"]: t for t in manifest["tasks"] if t.get("file")}
    sources = {f: (capture_dir / f).read_text(encoding="utf-8") for f in written if (capture_dir / f).is_file()}
    picked: dict[str, tuple[Chosen, str | None, dict]] = {}
    for run_dir in run_dirs:
        store = RunStore.open_readonly(run_dir)
        try:
            task_source = store.get_meta("task_source") or ""
            best = store.best()
        finally:
            store.close()
        # The region the run's task was captured from: a re-capture of the model keeps it, though the
        # task's text may differ (another ENTRY path, values drawn from other weights).
        region = region_of(task_source)
        file = next((f for f, t in written.items() if region and t.get("region") == region), None)
        file = file or next((f for f, text in sources.items() if _same_text(text, task_source)), None)
        if file is None:
            raise UserError(f"{run_dir}: its task is none of the task files in --capture {capture_dir}")
        if file in picked:
            raise UserError(f"{run_dir} and {picked[file][0].run_dir} are runs on the same task {file}: give one")
        task = written[file]
        chosen = Chosen(str(run_dir), Path(file).stem, task["share"], task["calls"], None, None)
        if best is None or best.code is None:
            chosen.why = "no successful program in the run"
        else:
            chosen.speedup, chosen.program, chosen.iteration = best.speedup, best.id, best.iteration
            chosen.noise = speedup_noise(best.eval)
            chosen.speedup_vs_compile = best.speedup_vs_compile
            if best.speedup_vs_compile is not None and best.speedup_vs_compile < min_speedup:
                chosen.compile_why = (
                    f"torch.compile keeps its own code for its regions: the kernel's verdict is "
                    f"{best.speedup_vs_compile:.3g}x torch.compile's, below --min-speedup {min_speedup:g}"
                )
            if best.speedup is None or best.speedup < min_speedup:
                speedup = f"{best.speedup or 0:.3g}x"
                chosen.why = f"its best kernel's speedup {speedup} is below --min-speedup {min_speedup:g}"
        picked[file] = (chosen, best.code if best is not None and chosen.why is None else None, task)
    return [picked[f] for f in sorted(picked, key=lambda f: written[f]["rank"])]


def write_patch(out: Path, capture_dir: Path, manifest: dict, picks: list[tuple[Chosen, str | None, dict]]) -> int:
    """The patch folder: the runtime, each kept kernel beside its task, patch.json, __init__.py.
    Returns how many kernels it holds."""
    kept = [(c, code, t) for c, code, t in picks if code is not None]
    if not kept:
        raise UserError("no run gives a kernel to apply: " + "; ".join(f"{c.name}: {c.why}" for c, _, _ in picks))
    runtime = runtime_files()
    prepare(
        out, PATCH_MANIFEST, {*runtime, *_EARLIER_RUNTIME, "__init__.py", "apply.json", "tasks", "kernels"}, "patch"
    )
    (out / "tasks").mkdir()
    (out / "kernels").mkdir()
    for name in runtime:
        shutil.copyfile(RUNTIME_DIR / name, out / name)
    entries = []
    for chosen, code, task in kept:
        shutil.copyfile(capture_dir / task["file"], out / "tasks" / task["file"])
        (out / "kernels" / task["file"]).write_text(code or "", encoding="utf-8")
        entries.append(
            dict(
                name=chosen.name,
                task=f"tasks/{task['file']}",
                kernel=f"kernels/{task['file']}",
                scopes=task.get("scopes") or [""],
                covers=task.get("covers") or [],
                calls=chosen.calls,
                share=chosen.share,
                speedup=chosen.speedup,
                run_dir=chosen.run_dir,
                program=chosen.program,
                iteration=chosen.iteration,
                speedup_vs_compile=chosen.speedup_vs_compile,
                compile_why=chosen.compile_why,
                modes=chosen.modes or verdict_modes(chosen),
            )
        )
    spec = dict(entry=manifest["entry"], device=manifest.get("device", "cpu"), kernels=entries)
    (out / PATCH_MANIFEST).write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    package = out.resolve().name if out.resolve().name.isidentifier() else "my_patch"
    (out / "__init__.py").write_text(INIT.format(entry=manifest["entry"], package=package), encoding="utf-8")
    return len(entries)


def write_modes(out: Path, kernels: list[Chosen], said: dict[str, str] | None = None) -> None:
    """patch.json's `modes` and `left_out` of each kernel from `kernels` (the runtime serves by them), and
    `served`: each mode's line (serving.py), where `said`."""
    path = out / PATCH_MANIFEST
    spec = json.loads(path.read_text(encoding="utf-8"))
    chosen = {c.name: c for c in kernels}
    for entry in spec["kernels"]:
        c = chosen[entry["name"]]
        entry["modes"], entry["left_out"] = list(c.modes), dict(c.left_out)
    if said is not None:
        spec["served"] = said
    path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")


def mark(out: Path, passed: bool, reason: str) -> None:
    """patch.json says whether the patch passed its end-to-end check, and why not (the package's apply()
    warns when it did not)."""
    path = out / PATCH_MANIFEST
    spec = json.loads(path.read_text(encoding="utf-8"))
    spec["check"] = {"passed": passed, "reason": reason}
    path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
