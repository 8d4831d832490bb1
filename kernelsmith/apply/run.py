"""`kernelsmith apply` as a function: the patch written (patch_dir.py), checked end to end in each mode
(e2e.py), its times against capture's and the verdicts' prediction (gains.py), and the record (apply.json)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from pydantic import ValidationError

from kernelsmith.apply import yardstick
from kernelsmith.apply.e2e import E2E, check, current_timers, trials
from kernelsmith.apply.e2e_outputs import FLAT
from kernelsmith.apply.gains import CaptureTime, Part, Prediction, Slowdown, against_capture, predict, slowdowns
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, choose, mark, read_capture, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError
from kernelsmith.patch.install import PatchError, install


@dataclass(kw_only=True)
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

    def _applied(self, e: E2E) -> list[Chosen]:
        """The kernels in the patch that this check's mode could substitute."""
        return [c for c in self.kernels if c.why is None and c.name not in e.skipped]

    def _failure(self, e: E2E) -> str | None:
        applied = self._applied(e)
        if not applied and e.mode != "eager" and any(c.why is None and c.compile_why for c in self.kernels):
            return None  # every kernel loses to torch.compile's own code: compiled graphs stay the model's
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
        took = lambda e: (
            "its kernels took their regions"
            if self._applied(e)
            else "torch.compile keeps its own code (no kernel's verdict beats it)"
        )
        said = "passed in " + "; ".join(f"{e.mode}: outputs {rule(e)}, {took(e)}" for e in checks)
        accepted = "; ".join(f"{s.line} ({s.accepted})" for s in self.slower)
        return True, f"{said}, but the patched forward is slower: {accepted}" if accepted else said

    def took(self, c: Chosen, e: E2E | None = None) -> bool:
        """The kernel (or the one its regions merged into) took its regions in the checked forwards."""
        e = e or self.e2e
        if e is None:
            return True
        return e.fired.get(e.merged.get(c.name, c.name), 0) > 0


def apply_runs(
    run_dirs: list[Path], capture_dir: Path, out: Path, options: ApplyOptions | None = None, **overrides
) -> Applied:
    """Write the patch for the runs' best kernels into `out` and, unless `options.check` is off, check it on
    the captured model in each of `options.modes` against the model run the same way.

    Args:
        run_dirs: search runs (`kernelsmith evolve` run directories), each on one of the capture's tasks.
        capture_dir: the folder `kernelsmith capture` wrote.
        out: the patch folder to write (an importable package name).
        options: ApplyOptions; `overrides` (its field names, e.g. modes=("eager", "compile")) change it.

    Returns the record that apply.json holds; raises UserError (one line) for what a user can fix. The check
    imports the kernels into this process and runs them outside any sandbox (they were judged inside one)."""
    try:
        opts = (options or ApplyOptions()).model_copy(update=overrides) if overrides else options or ApplyOptions()
        opts = ApplyOptions.model_validate(opts.model_dump())  # an override is checked as the fields are
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"apply: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return _apply(run_dirs, capture_dir, out, opts)


def _apply(run_dirs: list[Path], capture_dir: Path, out: Path, opts: ApplyOptions) -> Applied:
    manifest = read_capture(capture_dir)
    device = opts.device or manifest.get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(NO_CUDA_GPU)
    if "graphs" in opts.modes and device != "cuda":
        raise UserError(f"--mode graphs replays CUDA graphs: it needs --device cuda (this check runs on the {device})")
    picks = choose(run_dirs, capture_dir, manifest, opts.min_speedup_for(manifest.get("device", "cpu")))
    write_patch(out, capture_dir, manifest, picks)
    applied = Applied(
        out_dir=str(out),
        entry=manifest["entry"],
        device=device,
        kernels=[c for c, _, _ in picks],
        e2e=None,
        accept_slower=opts.accept_slower,
    )
    if opts.check:
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
            applied.checks = [
                check(entry, patch, device, opts.reps, opts.atol, opts.rtol, timers, mode, yard) for mode in opts.modes
            ]
        finally:
            patch.remove()
        applied.e2e = applied.checks[0]
        parts = {c.name: Part(c.share, c.calls, c.speedup or 1.0, c.noise) for c in applied.kernels if c.why is None}
        measure = manifest.get("measure")
        applied.slower = [s for e in applied.checks for s in slowdowns(e, parts, measure, opts.accept_slower)]
        eager = next((e for e in applied.checks if e.mode == "eager"), None)  # capture measured the eager forward
        if eager is not None:
            applied.prediction = predict(eager, parts, measure)
            applied.capture_times = against_capture(eager, manifest, device)
    applied.passed, applied.reason = applied.verdict()
    mark(out, applied.passed, applied.reason)
    (out / "apply.json").write_text(json.dumps(asdict(applied), indent=1) + "\n", encoding="utf-8")
    return applied
