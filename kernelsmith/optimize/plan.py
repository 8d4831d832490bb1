"""Which of the capture's regions are searched: the `--top` heaviest whose work is ours to fuse. Library ops
(GEMMs, attention, convolution, embedding: capture's LIBRARY_OPS) are left to their libraries; a region
capture could not write as a task says why."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Region:
    name: str
    rank: int
    share: float  # of the captured forward's time (capture's median)
    share_range: list[float] = field(default_factory=list)
    calls: int = 1  # per forward
    file: str | None = None  # its task file in the capture
    why: str | None = None  # why it is not searched (None: it is)
    floor_ms: float | None = None  # its calls' floor per forward on the card (capture's; None: no card)
    of_floor: float | None = None  # the fraction of it capture's time reached (floor over time)

    @property
    def searched(self) -> bool:
        return self.why is None


def _library(task: dict) -> str | None:
    """The library op a task is, by name (`mm`), or None."""
    if not task.get("library"):
        return None
    ops = task.get("ops") or ["?"]
    return str(ops[0]).split(".")[0]


def plan(manifest: dict, top: int) -> list[Region]:
    """Every region of the capture, in rank order, each searched or with why not."""
    regions, chosen = [], 0
    for t in sorted(manifest["tasks"], key=lambda t: t["rank"]):
        region = Region(t["name"], t["rank"], t["share"], list(t.get("share_range") or []), t["calls"], t.get("file"))
        region.floor_ms, region.of_floor = t.get("floor_ms"), t.get("of_floor")  # absent from an older capture
        library = _library(t)
        if library is not None:
            region.why = f"a library op ({library}): left to its library"
        elif not region.file:
            region.why = f"not captured as a task: {t.get('why') or 'capture.json says why'}"
        elif chosen >= top:
            region.why = f"beyond --top {top}"
        else:
            chosen += 1
        regions.append(region)
    return regions
