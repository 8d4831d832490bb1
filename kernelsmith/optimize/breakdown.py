"""Where the forward's time went, before and after the patch, region by region: the page's chart, in one
measure and in rows that add up to the whole.

The measure is the check's eager forward in capture's measure (apply measures the same quantity capture
did): before, the original forward's median time split by capture's shares; after, the patched forward as
the check measured it, a region at its kernel's time there where a kernel took it, at its verdict's
prediction (its time before over its kernel's speedup) where a kernel took it but no time was read, at its
time before where nothing took it. The rest of the forward (outside every region: Python, launches, the
patch's dispatch) is the whole less the rows, before and after, so that the rows add up to the whole in
both columns. Before, capture's profile and the check's forward were mixed (on the CPU the two differ 10x),
and the rest was left out after (issue 55). Where no eager forward was measured in capture's measure, the
rows are capture's shares, and after is each kernel's prediction; the whole is then not measured.
"""

from __future__ import annotations

from kernelsmith.optimize.result import ModeTime, PatchOutcome, RegionOutcome, TimeRow

REST = "the rest of the forward (outside the regions: Python, launches, the patch's dispatch)"


def _after(r: RegionOutcome, before: float) -> tuple[float, str]:
    """A searched region's time after (in before's unit), and how it was found."""
    k = r.kernel
    eager = k is not None and k.in_patch and "eager" in k.modes  # a kernel left out of eager mode changes nothing
    if k is None or not eager:
        return before, "unchanged"
    if k.served_by:
        return 0.0, f"in {k.served_by}'s kernel"
    if k.after_ms is not None:
        return k.after_ms.median, "measured"
    if k.taken.get("eager", 0) > 0 and r.speedup:
        return before / r.speedup, "predicted"
    return before, "unchanged"


def eager_time(patch: PatchOutcome | None, measure: str) -> ModeTime | None:
    """The check's eager forward in capture's measure: what the shares split (None: none was measured)."""
    times = patch.times if patch is not None else []
    return next((t for t in times if t.mode == "eager" and t.measure == measure and t.before_ms.median > 0), None)


def time_rows(regions: list[RegionOutcome], patch: PatchOutcome | None, measure: str) -> list[TimeRow]:
    """The chart's rows: each searched region, the library ops and other regions together, the rest, and
    the whole forward last; in ms of the check's forward where one was measured (module docstring)."""
    t = eager_time(patch, measure)
    whole = t.before_ms.median if t is not None else None
    scale = whole or 1.0  # ms per share of the forward (no check: the rows are shares)
    rows: list[TimeRow] = []
    library, other = (0.0, 0), (0.0, 0)
    for r in regions:
        before = r.share * scale
        if r.searched:
            after, how = _after(r, before)
            if whole is None and how == "measured":  # a kernel's ms without the forward's: its prediction
                after, how = (before / r.speedup, "predicted") if r.speedup else (before, "unchanged")
            rows.append(TimeRow(label=r.name, before=before, after=after, how=how))
        elif (r.note or "").startswith("a library op"):
            library = (library[0] + before, library[1] + 1)
        else:
            other = (other[0] + before, other[1] + 1)
    for (ms, n), label in ((library, "library ops ({} regions)"), (other, "other regions ({})")):
        if n:
            rows.append(TimeRow(label=label.format(n), before=ms, after=ms, how="unchanged"))
    listed_before, listed_after = sum(x.before for x in rows), sum(x.after or 0.0 for x in rows)
    if t is None or whole is None:
        if listed_before < scale:
            rows.append(TimeRow(label=REST, before=scale - listed_before, after=scale - listed_before, how="unchanged"))
        return rows + [TimeRow(label="the whole forward", before=scale, after=None, how="not measured")]
    after_whole = t.after_ms.median
    rows.append(TimeRow(label=REST, before=whole - listed_before, after=after_whole - listed_after, how="measured"))
    return rows + [TimeRow(label="the whole forward", before=whole, after=after_whole, how="measured")]
