"""The outcome of a run of `optimize`, region by region, from the capture, the work directory's state, the
runs' stores and the patch: what each region got, and what could not be done, in one line."""

from __future__ import annotations

from pathlib import Path

from kernelsmith.capture.floors import SpeedOfLight as Light
from kernelsmith.evaluate.measuring.roofline import of_floor
from kernelsmith.evolve.pace import combined
from kernelsmith.optimize.breakdown import eager_time, time_rows
from kernelsmith.optimize.budget import TIME_LIMIT, shown_time, stop_said
from kernelsmith.optimize.plan import Region
from kernelsmith.optimize.result import Optimized, PatchOutcome, RegionOutcome, Span, SpeedOfLight
from kernelsmith.optimize.runs import RunInfo
from kernelsmith.optimize.starts import start_advice
from kernelsmith.optimize.workdir import RegionState, WorkDir
from kernelsmith.progress import counted


def _note(r: Region, rs: RegionState, info: RunInfo, o: RegionOutcome, device: str) -> str | None:
    """What could not be done for the region, in one line (None: nothing to say)."""
    if r.why is not None:
        return r.why
    if rs.failed is not None and (not info.exists or rs.crashed):  # a crash after some iterations is said too
        return rs.failed
    if o.start is None:
        return rs.failed or "no starting kernel"
    k = o.kernel
    if info.best is None:
        start = info.start.status if info.start is not None else "not evaluated"
        return f"no correct kernel found (its start: {start})"
    if k is not None and k.why:
        return k.why
    if k is not None and k.in_patch and not k.modes and k.left_out:  # its times left it out of every mode
        return "serves no mode: " + "; ".join(f"{m}: {why}" for m, why in k.left_out.items())
    if k is not None and k.in_patch and not any(k.taken.values()) and not k.served_by:
        return "never took its regions"
    if device == "cuda" and o.speedup is not None and o.speedup < 1.0:
        return f"its best kernel is slower than its reference ({o.speedup:.3g}x)"
    if info.iterations == 0 and (rs.stop_reason or "").startswith(TIME_LIMIT):
        if info.elapsed_s > (o.allotment_s or 0.0):
            return (
                f"its start's evaluation alone took {shown_time(info.elapsed_s)} of its "
                f"{shown_time(o.allotment_s or 0.0)} share of the budget"
            )
        return f"its {shown_time(o.allotment_s or 0.0)} of the budget ended at its start"
    return None


def region_outcome(r: Region, rs: RegionState, info: RunInfo, wd: WorkDir, patch: PatchOutcome | None, device: str):
    o = RegionOutcome(
        name=r.name,
        rank=r.rank,
        share=r.share,
        share_range=r.share_range,
        calls=r.calls,
        task=f"capture/{r.file}" if r.file else None,
        searched=r.searched,
        floor_ms=r.floor_ms,
        of_floor=r.of_floor,
    )
    if r.searched:
        o.start = rs.seed_origin if rs.seed_origin is not None or info.exists else None
        o.allotment_s = rs.allotment_s if o.start is not None else None
        o.elapsed_s = info.elapsed_s if info.exists else None
        o.iterations = info.iterations
        stop = rs.stop_reason if rs.finished else ("interrupted" if info.exists else None)
        o.stop_reason = stop_said(stop, o.elapsed_s, o.allotment_s, o.iterations)
        best = info.best
        o.speedup, o.program = (best.speedup, best.id) if best is not None else (None, None)
        o.start_speedup = info.start.speedup if info.start is not None else None
        shown = best or info.start
        o.verdict = shown.status if shown is not None else None
        o.kernel = patch.kernels.get(r.name) if patch is not None else None
        k = o.kernel  # its regions' time where its kernel took them in the patched eager forward
        measured = k.after_ms if k is not None and k.in_patch and "eager" in k.modes and not k.served_by else None
        o.of_floor_after = of_floor(r.floor_ms, measured.median) if measured is not None else None
        report = wd.run_dir(r.name) / "report.html"
        o.run_report = str(report.relative_to(wd.out)) if report.is_file() else None
    o.note = _note(r, rs, info, o, device)
    return o


def search_said(o: RegionOutcome, stop: bool = False) -> str | None:
    """A region's search in a few words, as the table and the page say it: its iterations and time over every
    run of it, of its share of the budget (None: it was not searched); with `stop`, how it ended, its times
    said once."""
    if o.elapsed_s is None:
        return None
    said = f"{counted(o.iterations, 'iteration')}, {shown_time(o.elapsed_s)} of {shown_time(o.allotment_s or 0.0)}"
    if not stop or not o.stop_reason:
        return said
    spent = stop_said(f"{TIME_LIMIT} reached", o.elapsed_s, o.allotment_s, o.iterations) or ""
    ended = o.stop_reason
    return f"{said}; {f'{TIME_LIMIT} reached' + ended[len(spent) :] if ended.startswith(spent) else ended}"


def too_small(outcomes: list[RegionOutcome], budget_s: float) -> str | None:
    """One line when the budget ended every search at its starting kernel (nothing was searched)."""
    ran = [o for o in outcomes if o.searched and o.elapsed_s is not None]
    if ran and all(o.iterations == 0 and (o.stop_reason or "").startswith(TIME_LIMIT) for o in ran):
        spent = sum(o.elapsed_s or 0.0 for o in ran)
        return (
            f"the budget ({shown_time(budget_s)}) was too small to search: every region stopped at its starting "
            f"kernel (evaluating them took {shown_time(spent)}); give a larger --budget and run the same command "
            "again to go on"
        )
    return None


def verdict_line(patch: PatchOutcome | None, small: str | None) -> tuple[bool, str]:
    """(a patch was written and passed its check, the outcome in one line)."""
    if patch is None:
        return False, small or "no patch: no region has a kernel"
    if patch.path is None:
        return False, f"no patch: {patch.reason}"
    said = f"patch {Path(patch.path).name}: {'check passed' if patch.passed else 'check FAILED'}: {patch.reason}"
    return patch.passed, said


def span(d: dict | None, scale: float = 1.0) -> Span | None:
    if not d:
        return None
    return Span(median=d["median"] * scale, low=d["low"] * scale, high=d["high"] * scale)


def speed_of_light(manifest: dict, patch: PatchOutcome | None) -> SpeedOfLight | None:
    """The forward's speed of light from the capture (None: a capture made before it was kept), and the fractions
    of its floor each mode's times reach before and after the patch, set on the patch's times."""
    found = manifest.get("speed_of_light")
    if not found:
        return None
    light = SpeedOfLight(**found, said=Light(**found).said())
    for t in patch.times if patch is not None else []:
        t.of_floor_before = of_floor(light.floor_ms, t.before_ms.median)
        t.of_floor_after = of_floor(light.floor_ms, t.after_ms.median)
    return light


def summarize(
    manifest: dict,
    regions: list[Region],
    states: dict[str, RegionState],
    infos: dict[str, RunInfo],
    wd: WorkDir,
    patch: PatchOutcome | None,
    budget_s: float,
) -> Optimized:
    device = manifest.get("device", "cpu")
    outcomes = [
        region_outcome(r, states.get(r.name) or RegionState(), infos.get(r.name) or RunInfo(), wd, patch, device)
        for r in regions
    ]
    small = too_small(outcomes, budget_s)
    passed, reason = verdict_line(patch, small)
    crashed = {name for name, rs in states.items() if rs.crashed}
    startless = [o.name for o in outcomes if o.searched and o.start is None and o.name not in crashed]
    search_total_s = sum(o.elapsed_s or 0.0 for o in outcomes)
    ran = [info.pace for r in regions if r.searched and (info := infos.get(r.name)) is not None and info.exists]
    return Optimized(
        entry=manifest["entry"],
        device=device,
        out=str(wd.out),
        measure=manifest.get("measure") or "",
        profiled_ms=span(manifest.get("profiled_us"), 1e-3),
        wall_ms=span(manifest.get("wall_ms")),
        speed_of_light=speed_of_light(manifest, patch),
        budget_s=budget_s,
        search_total_s=search_total_s,
        evaluations=combined(ran, search_total_s) if ran else None,
        regions=outcomes,
        time_rows=time_rows(outcomes, patch, manifest.get("measure") or ""),
        time_unit="ms" if eager_time(patch, manifest.get("measure") or "") is not None else "share",
        patch=patch,
        too_small=small,
        start_advice=start_advice(startless, device) if startless else None,
        startless=startless,
        passed=passed,
        reason=reason,
    )
