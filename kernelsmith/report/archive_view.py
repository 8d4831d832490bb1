"""The run's archive as the engine last held it: rebuilt by replaying the stored programs, then
laid out per island as a grid of descriptor bins with each cell's elite.

The replay is the engine's own (`Engine._rebuild` / `_admit`): programs in the order they were
stored, iteration 0 added to every island without counting toward migration, every other
iteration to its island (a program-less iteration still counts), with the run's stored
`ArchiveConfig`, so migrations land where they landed during the run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kernelsmith.evolve.archive import Archive
from kernelsmith.evolve.config import ArchiveConfig
from kernelsmith.evolve.descriptors import FEATURES
from kernelsmith.evolve.program import Program

_OPEN_END = 10**9  # the largest descriptor value looked at when naming bins


def stored_id(p: Program) -> int:
    """The id of a program read from a store (the store gives every program it holds one)."""
    if p.id is None:
        raise ValueError(f"the program of iteration {p.iteration} has no id: it was never stored")
    return p.id


def replay(programs: list[Program], cfg: ArchiveConfig) -> Archive:
    """The archive after admitting `programs` (in stored order) exactly as the engine does."""
    archive = Archive(cfg)
    for p in sorted(programs, key=stored_id):
        archive.admit(
            archive.entry(stored_id(p), p.score, p.ok, p.descriptors) if p.code is not None else None,
            p.iteration,
            p.island,
        )
    return archive


def bin_labels(feature: str, bins: int) -> list[str | None]:
    """A label per bin of one feature, from the whole values that fall in it ("0", "2-3", ">=4");
    None for a bin that no value reaches (a yes/no feature uses 2 of its bins). The binning
    functions never decrease with the value, so each bin's first value is found by bisection."""
    binner = FEATURES[feature].bin

    def first_reaching(b: int) -> int | None:  # the smallest value whose bin is >= b
        lo, hi = 0, _OPEN_END
        if binner(float(hi), bins) < b:
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if binner(float(mid), bins) < b else (lo, mid)
        return lo

    starts = [first_reaching(b) for b in range(bins)] + [None]
    labels: list[str | None] = []
    for b in range(bins):
        start = starts[b]
        if start is None or binner(float(start), bins) != b:
            labels.append(None)
            continue
        end = next((s - 1 for s in starts[b + 1 :] if s is not None), None)
        labels.append(f">={start}" if end is None else str(start) if end == start else f"{start}-{end}")
    return labels


@dataclass
class GridCell:
    cell: list[int]  # the bin of each feature
    id: int  # the elite's program id
    score: float
    ok: bool


@dataclass
class IslandGrid:
    island: int
    members: int
    cells: list[GridCell]


@dataclass
class ArchiveView:
    """What the page draws: rows are the first feature's bins, columns the other features' bins."""

    features: list[str]
    labels: list[list[str | None]]  # per feature, per bin
    rows: list[int]  # bins of the first feature
    columns: list[list[int]]  # bins of the other features, one list per column
    islands: list[IslandGrid] = field(default_factory=list)
    migrations: int = 0
    max_columns_shown: int = 16


def archive_view(programs: list[Program], cfg: ArchiveConfig) -> ArchiveView:
    archive = replay(programs, cfg)
    labels = [bin_labels(f, cfg.bins) for f in cfg.features]
    reachable = [[b for b, label in enumerate(ls) if label is not None] for ls in labels]
    islands = []
    for i in range(len(archive.islands)):
        cells = [GridCell(list(c), e.id, e.score, e.ok) for c, e in sorted(archive.cells(i).items())]
        islands.append(IslandGrid(i, len(archive.islands[i].members), cells))
    # Every combination of the other features' bins when that is few enough to read; otherwise
    # only the combinations some island occupies.
    occupied = [c.cell for isl in islands for c in isl.cells]
    rows = sorted(set(reachable[0]) | {c[0] for c in occupied})
    view = ArchiveView(cfg.features, labels, rows, [], islands, archive.migrations)
    every = list(itertools.product(*reachable[1:]))
    used = sorted({tuple(c[1:]) for c in occupied})
    if len(every) <= view.max_columns_shown:
        used = sorted({tuple(c) for c in every} | set(used))
    view.columns = [list(c) for c in used]
    return view
