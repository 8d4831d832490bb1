"""The patch: the searches' best kernels through `kernelsmith apply`, checked end to end in each mode.

Apply serves each mode only with the kernels that make it faster (apply/serving.py): a kernel its times
left out of every mode stays in the patch folder, serving none, said beside its region. A kernel that
never takes its regions in a mode it serves did none of the model's work there, and would fail the whole
patch's check: it is left out, said in one line beside its region, and the patch is made again without it
(once). A patch of the same kernels (each run's best program) checked in the same modes by the same rule
is not made again on a resumed run: its outcome is the one stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from kernelsmith.apply.forward_time import Spread
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.run import Applied, apply_runs
from kernelsmith.errors import UserError, one_line
from kernelsmith.evolve.store import RunStore, holds_run
from kernelsmith.optimize.result import Kernel, ModeOutcome, ModeTime, PatchOutcome, Span


def best_program(run_dir: Path) -> int | None:
    """The id of the run's best program (a success), or None."""
    if not holds_run(run_dir):
        return None
    store = RunStore.open_readonly(run_dir)
    try:
        best = store.best()
        return best.id if best is not None else None
    finally:
        store.close()


# The rule a patch's modes were chosen by: a patch stored under an earlier rule is made again (2: each mode
# served only by the kernels that make it faster, apply/serving.py).
PATCH_RULE = 2


def patch_key(runs: dict[str, Path], modes: tuple[str, ...], settings: dict) -> str:
    """What a patch is made of: each run's best program, the modes, the check's settings and its rule."""
    made = {name: best_program(d) for name, d in sorted(runs.items())}
    text = json.dumps({"kernels": made, "modes": list(modes), "rule": PATCH_RULE, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _span(s: Spread) -> Span:
    return Span(median=s.median, low=s.low, high=s.high)


def _idle(applied: Applied) -> dict[str, str]:
    """Kernels in the patch that took none of their regions in some mode: name -> in which."""
    idle: dict[str, str] = {}
    for e in applied.checks:
        for c in applied.kernels:
            if c.why is None and c.name not in e.skipped and not applied.took(c, e):
                idle.setdefault(c.name, e.mode)
    return idle


def outcome(applied: Applied, key: str, left_out: dict[str, str]) -> PatchOutcome:
    """The patch's outcome from apply's record; `left_out`: kernels dropped before it, and why."""
    kernels: dict[str, Kernel] = {n: Kernel(in_patch=False, why=why) for n, why in left_out.items()}
    first = applied.checks[0] if applied.checks else None
    checked = {m.mode for m in applied.modes if m.checked}  # a mode not checked is said once, in `modes`
    for c in applied.kernels:
        k = Kernel(in_patch=c.why is None, why=c.why, modes=list(c.modes))
        k.left_out = {m: why for m, why in c.left_out.items() if m in checked}
        for e in applied.checks:
            if c.name in e.unserved:  # not expected to take its regions there: `left_out` says why
                continue
            if c.name in e.skipped:
                k.why = k.why or f"not substituted in {e.mode} mode: {e.skipped[c.name]}"
            keeper = e.merged.get(c.name, c.name)
            k.taken[e.mode] = e.fired.get(keeper, 0.0)
            if keeper != c.name:
                k.served_by = keeper
            elif not k.taken[e.mode] and e.fired.get(e.within.get(c.name, ""), 0.0):
                k.served_by = e.within[c.name]  # its regions lay inside that kernel's larger ones
        if first is not None:
            k.served = first.served.get(c.name)
            eager = next((e for e in applied.checks if e.mode == "eager"), None)
            if eager is not None and c.name in eager.kernel_ms:  # it serves eager mode
                k.after_ms = _span(eager.kernel_ms[c.name])
        kernels[c.name] = k
    times = [
        ModeTime(
            mode=e.mode,
            measure=t.measure,
            before_ms=_span(t.before_ms),
            after_ms=_span(t.after_ms),
            speedup=t.speedup,
            within_noise=t.within_noise,
        )
        for e in applied.checks
        for t in e.timings
    ]
    return PatchOutcome(
        key=key,
        path=applied.out_dir,
        passed=applied.passed,
        reason=applied.reason,
        kernels=kernels,
        times=times,
        modes=[
            ModeOutcome(
                mode=m.mode,
                checked=m.checked,
                kernels=list(m.kernels),
                as_was=m.as_was,
                measure=m.measure,
                speedup=m.speedup,
                said=m.said,
            )
            for m in applied.modes
        ],
        prediction=asdict(applied.prediction) if applied.prediction is not None else None,
        capture_times=[asdict(c) for c in applied.capture_times],
    )


def make_patch(
    runs: dict[str, Path],
    capture_dir: Path,
    out: Path,
    device: str,
    modes: tuple[str, ...],
    reps: int,
    min_speedup: float,
    accept_slower: str,
    key: str,
) -> PatchOutcome:
    """The patch of `runs` (region name -> its run directory) in `out`, checked in `modes`; what apply
    cannot do is the outcome's reason (no kernel to apply, a patch that does not fit the model)."""
    left_out: dict[str, str] = {}

    def apply(names: list[str]) -> Applied:
        dirs = [runs[n] for n in names]
        options = ApplyOptions(
            device=device,  # pyright: ignore[reportArgumentType]
            reps=reps,
            min_speedup=min_speedup,
            accept_slower=accept_slower,  # pyright: ignore[reportArgumentType]
            modes=modes,  # pyright: ignore[reportArgumentType]
        )
        return apply_runs(dirs, capture_dir, out, options)

    try:
        applied = apply(list(runs))
        idle = _idle(applied)
        if idle and len(idle) < len([c for c in applied.kernels if c.why is None]):
            left_out = {n: f"never took its regions in {mode} mode: left out of the patch" for n, mode in idle.items()}
            applied = apply([n for n in runs if n not in left_out])
    except UserError as exc:
        kernels = {n: Kernel(in_patch=False, why=why) for n, why in left_out.items()}
        return PatchOutcome(key=key, path=None, passed=False, reason=one_line(str(exc), 600), kernels=kernels)
    return outcome(applied, key, left_out)
