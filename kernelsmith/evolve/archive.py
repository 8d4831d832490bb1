"""The archive: islands, each a MAP-Elites grid plus its best programs, with ring migration.

Islands evolve apart (a child joins its parent's island) so that one early leader does not
take over the whole population; every `migration_interval` new programs, each island's best
correct programs are copied to the next island in a ring. Within an island, parents come from
its best programs (exploitation, weighted by score) or from a random cell of its grid
(exploration); inspirations are its top programs plus elites of other cells.

The archive holds ids and scores only (programs live in the store) and is rebuilt on resume by
replaying the stored programs in id order, which reproduces every migration. Choices take an
explicit `random.Random`, so a run is reproducible given the same replies.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field

from kernelsmith.evolve.config import ArchiveConfig
from kernelsmith.evolve.descriptors import cell_of
from kernelsmith.evolve.program import rank_key


@dataclass(frozen=True)
class Entry:
    id: int
    score: float
    ok: bool  # correct and unflagged
    cell: tuple[int, ...]

    @property
    def rank_key(self) -> tuple[bool, float, int]:
        return rank_key(self.ok, self.score, self.id)


@dataclass
class Selection:
    parent_id: int | None  # None: the island holds no program yet (translate the reference)
    parent_ok: bool
    top_ids: list[int]  # the island's best correct programs
    diverse_ids: list[int]  # correct elites of other grid cells
    how: str  # exploit | explore | repair | empty

    @property
    def inspiration_ids(self) -> list[int]:
        return self.top_ids + self.diverse_ids


class _Ranked:
    """The best `size` entries in `rank_key` order, kept sorted; entries are final."""

    def __init__(self, size: int):
        self.size = size
        self.keys: list[tuple[bool, float, int]] = []

    def add(self, e: Entry) -> None:
        key = e.rank_key
        if len(self.keys) >= self.size and key >= self.keys[-1]:
            return
        bisect.insort(self.keys, key)
        del self.keys[self.size :]

    def ids(self) -> list[int]:
        return [i for *_, i in self.keys]


@dataclass
class Island:
    members: set[int] = field(default_factory=set)
    grid: dict[tuple[int, ...], Entry] = field(default_factory=dict)  # the best entry per cell (rank_key)
    best_ok: _Ranked = field(kw_only=True)  # sized by the archive's config
    best_miss: _Ranked = field(kw_only=True)  # nearest misses, for repair while nothing is correct


class Archive:
    def __init__(self, cfg: ArchiveConfig):
        self.cfg = cfg
        keep = max(cfg.elite_k, cfg.top_inspirations + 1, cfg.migration_count) + 4
        self.islands = [Island(best_ok=_Ranked(keep), best_miss=_Ranked(cfg.elite_k)) for _ in range(cfg.islands)]
        self.entries: dict[int, Entry] = {}
        self.added = 0  # programs added since the start (migrations are counted on it)
        self.migrations = 0

    # ---- building
    def entry(self, program_id: int, score: float, ok: bool, descriptors: dict[str, float]) -> Entry:
        return Entry(program_id, score, ok, cell_of(descriptors, self.cfg.features, self.cfg.bins))

    def add(self, e: Entry | None, island: int | None, count: bool = True) -> None:
        """Add a program to one island (None: to every island, as for the starting program).

        `e` is None for an iteration that produced no program: it still counts toward migration,
        so that replaying the store reproduces the same migrations."""
        if e is not None:
            self.entries[e.id] = e
            for i in range(len(self.islands)) if island is None else [island % len(self.islands)]:
                self._place(self.islands[i], e)
        if count:
            self.added += 1
            if self.cfg.migration_interval and self.added % self.cfg.migration_interval == 0:
                self.migrate()

    def admit(self, e: Entry | None, iteration: int, island: int) -> None:
        """Add a stored program as the search does: the starting program (iteration 0) seeds every
        island and does not count toward migration; any other goes to its island and counts."""
        if iteration == 0:
            if e is not None:
                self.add(e, None, count=False)
        else:
            self.add(e, island)

    @staticmethod
    def _place(isl: Island, e: Entry) -> None:
        if e.id in isl.members:
            return
        isl.members.add(e.id)
        held = isl.grid.get(e.cell)
        if held is None or e.rank_key < held.rank_key:  # a correct program holds its cell over any failure
            isl.grid[e.cell] = e
        (isl.best_ok if e.ok else isl.best_miss).add(e)

    def migrate(self) -> None:
        """Ring migration: island i's best correct programs join island i+1."""
        n = len(self.islands)
        if n < 2 or self.cfg.migration_count == 0:
            return
        movers = [isl.best_ok.ids()[: self.cfg.migration_count] for isl in self.islands]
        for i, ids in enumerate(movers):
            for pid in ids:
                self._place(self.islands[(i + 1) % n], self.entries[pid])
        self.migrations += 1

    # ---- choosing
    def select(self, island: int, rng: random.Random) -> Selection:
        isl = self.islands[island % len(self.islands)]
        if not isl.members:
            return Selection(None, False, [], [], "empty")
        top = isl.best_ok.ids()
        if not top:  # nothing correct here yet: repair one of the nearest misses
            parent = rng.choice(isl.best_miss.ids()[: self.cfg.elite_k])
            return Selection(parent, False, *self.inspirations(isl, parent, rng), "repair")
        if rng.random() < self.cfg.exploit_ratio:
            elite = top[: self.cfg.elite_k]
            weights = [max(self.entries[i].score, 1e-6) for i in elite]
            parent, how = rng.choices(elite, weights=weights)[0], "exploit"
        else:
            cells = sorted(isl.grid)
            ok_cells = [c for c in cells if isl.grid[c].ok]
            parent, how = isl.grid[rng.choice(ok_cells or cells)].id, "explore"
        return Selection(parent, self.entries[parent].ok, *self.inspirations(isl, parent, rng), how)

    def inspirations(self, isl: Island, parent: int, rng: random.Random) -> tuple[list[int], list[int]]:
        """Top correct programs of the island, then correct elites of other cells."""
        top = [i for i in isl.best_ok.ids() if i != parent][: self.cfg.top_inspirations]
        parent_cell = self.entries[parent].cell
        others = [
            e.id
            for c, e in sorted(isl.grid.items())
            if e.ok and c != parent_cell and e.id != parent and e.id not in top
        ]
        diverse = rng.sample(others, min(self.cfg.diverse_inspirations, len(others)))
        return top, diverse

    def best_ids(self, n: int) -> list[int]:
        """The n best correct programs of all islands (from each island's kept best)."""
        ids = {i for isl in self.islands for i in isl.best_ok.ids()}
        return sorted(ids, key=lambda i: self.entries[i].rank_key)[:n]

    def cells(self, island: int) -> dict[tuple[int, ...], Entry]:
        return dict(self.islands[island].grid)
