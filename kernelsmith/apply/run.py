"""`kernelsmith apply` as a function: the patch written (patch_dir.py), checked end to end in each mode
(e2e.py), each mode served only by the kernels that make it faster (serving.py), its times against
capture's and the verdicts' prediction (gains.py), and the record (apply.json)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from pydantic import ValidationError

from kernelsmith.apply import yardstick
from kernelsmith.apply.e2e import E2E, current_timers, trials
from kernelsmith.apply.e2e_outputs import FLAT
from kernelsmith.apply.gains import CaptureTime, Part, Prediction, Slowdown, against_capture, predict, slowdowns
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, choose, mark, read_capture, write_patch
from kernelsmith.apply.serving import Checking, ModeServed, broken, serve, took
from kernelsmith.capture.entry import call_entry
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError
from kernelsmith.patch.install import install


@dataclass(kw_only=True)
class Applied:
    out_dir: str
    entry: str
    device: str
    kernels: list[Chosen]
    e2e: E2E | None  # the first check in `checks` (None: --no-check, or no mode checked with kernels)
    accept_slower: str = "none"  # --accept-slower
    # the check that decided each mode kernels serve (or in which the patch failed), in --mode's order
    checks: list[E2E] = field(default_factory=list)
    modes: list[ModeServed] = field(default_factory=list)  # every mode as the patch serves it (serving.py)
    slower: list[Slowdown] = field(default_factory=list)  # the measures in which a served mode is slower
    prediction: Prediction | None = None  # the forward's change that the kernels' verdicts predict
    capture_times: list[CaptureTime] = field(default_factory=list)  # capture's times of the original forward
    passed: bool = False  # the end-to-end check ran and passed (a slower forward only where accepted)
    reason: str = "the end-to-end check did not run"  # one line: why it passed or failed

    @property
    def ok(self) -> bool:
        """The check passed: outputs match, every kernel serving a mode took its regions there, no timer
        was replaced, and no mode is slower for the patch (or that is accepted)."""
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
        """The kernels in the patch that serve this check's mode (a merged one through its keeper)."""
        return [c for c in self.kernels if c.why is None and c.name not in e.skipped]

    def _failure(self, e: E2E) -> str | None:
        why = broken(e, self.kernels)
        if why is not None:
            return why
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
        if not checks and not self.modes:
            return False, "not checked (--no-check)"
        if self.failure is not None:
            return False, self.failure
        rule = lambda e: "within the flat tolerance" if e.outputs_rule == FLAT else "within the model's own error"
        said = [f"{e.mode}: outputs {rule(e)}, its kernels took their regions" for e in checks]
        said += [m.said for m in self.modes if m.as_was is not None and m.checked]
        lead = "passed in " if checks else "passed, but the patch serves no mode: "
        accepted = "; ".join(f"{s.line} ({s.accepted})" for s in self.slower)
        said_all = lead + "; ".join(said)
        return True, f"{said_all}, but the patched forward is slower: {accepted}" if accepted else said_all

    def took(self, c: Chosen, e: E2E | None = None) -> bool:
        """The kernel (or the one its regions merged into) took its regions in the checked forwards."""
        e = e or self.e2e
        return True if e is None else took(c, e)


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
    opts = opts.model_copy(update={"modes": opts.modes_for(device)})
    if "graphs" in opts.modes_for(device) and device != "cuda":
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
        entry = call_entry(manifest["entry"], device, (manifest.get("shapes") or [None])[0])  # its main shape
        yard = yardstick.measure(entry.model, trials(entry), device)  # before the patch is on the model
        parts = {c.name: Part(c.share, c.calls, c.speedup or 1.0, c.noise) for c in applied.kernels if c.why is None}
        measure = manifest.get("measure")
        checking = Checking(entry, out, device, opts, timers, yard, parts, measure, install)
        applied.checks, applied.modes = serve(checking, applied.kernels)
        applied.e2e = applied.checks[0] if applied.checks else None
        applied.slower = [s for e in applied.checks for s in slowdowns(e, parts, measure, opts.accept_slower)]
        eager = next((e for e in applied.checks if e.mode == "eager"), None)  # capture measured the eager forward
        if eager is not None:
            applied.prediction = predict(eager, parts, measure)
            applied.capture_times = against_capture(eager, manifest, device)
    applied.passed, applied.reason = applied.verdict()
    mark(out, applied.passed, applied.reason)
    (out / "apply.json").write_text(json.dumps(asdict(applied), indent=1) + "\n", encoding="utf-8")
    return applied
