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
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernelsmith.capture import yardstick
from kernelsmith.capture.e2e import E2E, check, current_timers, trials
from kernelsmith.capture.e2e_outputs import FLAT
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.gains import CaptureTime, Part, Prediction, Slowdown, against_capture, predict, slowdowns
from kernelsmith.capture.outdir import prepare
from kernelsmith.capture.patch_runtime import PatchError, install
from kernelsmith.capture.run import MANIFEST as CAPTURE_MANIFEST
from kernelsmith.capture.task_file import region_of
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError
from kernelsmith.evaluate.measuring.noise import speedup_noise
from kernelsmith.evolve.store import RunStore

PATCH_MANIFEST = "patch.json"
RUNTIME = (
    "pattern.py",
    "match.py",
    "substitute.py",
    "kernel_op.py",
    "module_swap.py",
    "graph_match.py",
    "inline.py",
    "graph_pass.py",
    "eager_graph.py",
    "interpreter.py",
    "patch_runtime.py",
)
INIT = '''"""Kernels for {entry}, written by `kernelsmith apply` (patch.json lists them; its "check" says
whether they passed the end-to-end check, apply.json how: apply() warns when they did not).

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

from .patch_runtime import install


def apply(model, device=None):
    here = Path(__file__).parent
    check = json.loads((here / "patch.json").read_text(encoding="utf-8")).get("check") or {{}}
    if not check.get("passed"):
        why = check.get("reason") or "it was not checked"
        warnings.warn(f"{{here.name}}: FAILED kernelsmith apply's end-to-end check: {{why}} (apply.json says more)")
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


def _same(a: str, b: str) -> bool:
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
        file = file or next((f for f, text in sources.items() if _same(text, task_source)), None)
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
    prepare(out, PATCH_MANIFEST, {*RUNTIME, "__init__.py", "apply.json", "tasks", "kernels"}, "patch")
    (out / "tasks").mkdir()
    (out / "kernels").mkdir()
    here = Path(__file__).parent
    for name in RUNTIME:
        shutil.copyfile(here / name, out / name)
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
            )
        )
    spec = dict(entry=manifest["entry"], device=manifest.get("device", "cpu"), kernels=entries)
    (out / PATCH_MANIFEST).write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    package = out.resolve().name if out.resolve().name.isidentifier() else "my_patch"
    (out / "__init__.py").write_text(INIT.format(entry=manifest["entry"], package=package), encoding="utf-8")
    return len(entries)


def mark(out: Path, passed: bool, reason: str) -> None:
    """patch.json says whether the patch passed its end-to-end check, and why not (the package's apply()
    warns when it did not)."""
    path = out / PATCH_MANIFEST
    spec = json.loads(path.read_text(encoding="utf-8"))
    spec["check"] = {"passed": passed, "reason": reason}
    path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")


@dataclass
class Applied:
    out_dir: str
    entry: str
    device: str
    kernels: list[Chosen]
    e2e: E2E | None  # the first mode's check (None: --no-check)
    accept_slower: str = "none"  # --accept-slower
    checks: list[E2E] = field(default_factory=list)  # each mode's check, in --mode's order (e2e first)
    slower: list[Slowdown] = field(default_factory=list)  # the measures in which the patched forward is slower
    prediction: Prediction | None = None  # the forward's change that the kernels' verdicts predict
    capture_times: list[CaptureTime] = field(default_factory=list)  # capture's times of the original forward
    passed: bool = False  # the end-to-end check ran and passed (a slower forward only where accepted)
    reason: str = "the end-to-end check did not run"  # one line: why it passed or failed

    @property
    def ok(self) -> bool:
        """The check passed: some kernel was substituted, outputs match, every substituted kernel took
        its regions, no timer was replaced, and the patched forward is no slower (or that is accepted)."""
        return self.failure is None

    @property
    def failure(self) -> str | None:
        """Why the check failed, in one line (None: it passed, or did not run); a mode other than eager
        names itself."""
        for e in self.checks or ([self.e2e] if self.e2e is not None else []):
            why = self._failure(e)
            if why is not None:
                return why if e.mode == "eager" else f"{e.mode}: {why}"
        return None

    def _failure(self, e: E2E) -> str | None:
        applied = [c for c in self.kernels if c.why is None and c.name not in e.skipped]
        if not applied:
            why = "; ".join(f"{c.name}: {c.why or e.skipped.get(c.name)}" for c in self.kernels)
            return f"no kernel could be substituted, so the patch does nothing ({why})"
        if not e.outputs_match:
            return e.mismatch or "outputs differ from the model's"
        if e.forged:
            return e.forged
        if len(e.graph_breaks) == 2 and e.graph_breaks[1] > e.graph_breaks[0]:
            return (
                f"the patch breaks torch.compile's graph: {e.graph_breaks[1]} graph breaks, the model alone "
                f"{e.graph_breaks[0]} ({'; '.join(e.break_reasons)})"
            )
        idle = [c.name for c in applied if not self.took(c, e)]
        if idle:
            return f"{', '.join(idle)} never took its region (it did none of the model's work)"
        failing = [s for s in self.slower if s.accepted is None and s.mode == e.mode]
        if failing:
            accept = "eager" if all(s.measure == "eager time" for s in failing) else "all"
            return (
                f"the patched forward is slower, a failed promise: {'; '.join(s.line for s in failing)} "
                f"(--accept-slower {accept} accepts it)"
            )
        return None

    def verdict(self) -> tuple[bool, str]:
        """(passed, the reason in one line): the check ran and passed, or why not."""
        checks = self.checks or ([self.e2e] if self.e2e is not None else [])
        if not checks:
            return False, "not checked (--no-check)"
        if self.failure is not None:
            return False, self.failure
        rule = lambda e: "within the flat tolerance" if e.outputs_rule == FLAT else "within the model's own error"
        said = "passed in " + "; ".join(f"{e.mode}: outputs {rule(e)}, its kernels took their regions" for e in checks)
        accepted = "; ".join(f"{s.line} ({s.accepted})" for s in self.slower)
        return True, f"{said}, but the patched forward is slower: {accepted}" if accepted else said

    def took(self, c: Chosen, e: E2E | None = None) -> bool:
        """The kernel (or the one its regions merged into) took its regions in the checked forwards."""
        e = e or self.e2e
        if e is None:
            return True
        return e.fired.get(e.merged.get(c.name, c.name), 0) > 0


def apply_runs(
    run_dirs: list[Path],
    capture_dir: Path,
    out: Path,
    device: str | None = None,
    check_e2e: bool = True,
    reps: int = 10,
    atol: float | None = None,
    rtol: float | None = None,
    min_speedup: float = 1.0,
    accept_slower: str = "none",
    modes: tuple[str, ...] = ("eager",),
) -> Applied:
    """Write the patch for the runs' best kernels; unless told not to, check it on the captured model,
    in each of `modes` (eager, compile, graphs) against the model run the same way."""
    manifest = read_capture(capture_dir)
    device = device or manifest.get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(NO_CUDA_GPU)
    if "graphs" in modes and device != "cuda":
        raise UserError(f"--mode graphs replays CUDA graphs: it needs --device cuda (this check runs on the {device})")
    picks = choose(run_dirs, capture_dir, manifest, min_speedup)
    write_patch(out, capture_dir, manifest, picks)
    applied = Applied(str(out), manifest["entry"], device, [c for c, _, _ in picks], None, accept_slower)
    if check_e2e:
        if device == "cpu":  # Triton kernels run on the CPU in its interpreter, as the sandboxes run them
            os.environ["TRITON_INTERPRET"] = "1"
        timers = current_timers()  # before any kernel module is imported
        entry = call_entry(manifest["entry"], device)
        yard = yardstick.measure(entry.model, trials(entry), device)  # before the patch is on the model
        try:
            patch = install(entry.model, out, device)
        except PatchError as exc:
            raise UserError(f"the patch does not fit the model: {exc}") from None
        try:
            applied.checks = [check(entry, patch, device, reps, atol, rtol, timers, mode, yard) for mode in modes]
        finally:
            patch.remove()
        applied.e2e = applied.checks[0]
        parts = {c.name: Part(c.share, c.calls, c.speedup or 1.0, c.noise) for c in applied.kernels if c.why is None}
        measure = manifest.get("measure")
        applied.slower = [s for e in applied.checks for s in slowdowns(e, parts, measure, accept_slower)]
        eager = next((e for e in applied.checks if e.mode == "eager"), None)  # capture measured the eager forward
        if eager is not None:
            applied.prediction = predict(eager, parts, measure)
            applied.capture_times = against_capture(eager, manifest, device)
    applied.passed, applied.reason = applied.verdict()
    mark(out, applied.passed, applied.reason)
    (out / "apply.json").write_text(json.dumps(asdict(applied), indent=1) + "\n", encoding="utf-8")
    return applied
