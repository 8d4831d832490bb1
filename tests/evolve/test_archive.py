"""The archive on its own: islands, MAP-Elites cells, selection, inspirations and ring migration."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kernelsmith.evolve.archive import Archive
from kernelsmith.evolve.config import ArchiveConfig
from kernelsmith.evolve.descriptors import cell_of, describe

TRITON_ONE = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass

class ModelNew:
    pass
"""

TRITON_DOT = TRITON_ONE.replace("    pass\n\nclass", "    acc = tl.dot(a, b)\n\nclass")


def cfg(**kw) -> ArchiveConfig:
    base = dict(islands=2, migration_interval=0, features=["launches", "uses_dot"], bins=4, elite_k=3)
    return ArchiveConfig(**(base | kw))


def add(
    a: Archive, pid: int, score: float, ok: bool = True, island: int | None = 0, launches: float = 1, dot: float = 0
) -> None:
    a.add(a.entry(pid, score, ok, {"launches": launches, "uses_dot": dot}), island, count=island is not None)


def test_descriptors_read_code_and_launch_counts():
    d = describe(
        TRITON_DOT,
        {"kernel_launches": 6, "trials": [{}, {}, {}]},
        ["launches", "kernels", "uses_dot", "complexity", "autotune"],
    )
    assert d == {"launches": 2.0, "kernels": 1.0, "uses_dot": 1.0, "complexity": d["complexity"], "autotune": 0.0}
    assert 5 <= d["complexity"] <= 12
    assert describe(TRITON_ONE, None, ["uses_dot", "launches"]) == {"uses_dot": 0.0, "launches": 0.0}
    # a trial that sent no output (it timed out) launched nothing that was counted
    silent = {"kernel_launches": 6, "trials": [{}, {}, {}, {"ok": False, "answered": False}]}
    assert describe(TRITON_DOT, silent, ["launches"]) == {"launches": 2.0}
    # bins: 0 | 1 | 2-3 | 4-7 | capped at bins - 1
    assert [cell_of({"launches": v}, ["launches"], 4)[0] for v in (0, 1, 2, 3, 4, 9, 100)] == [0, 1, 2, 2, 3, 3, 3]


def test_unknown_feature_is_a_config_error():
    with pytest.raises(ValueError, match="unknown feature 'nope'"):
        ArchiveConfig(features=["launches", "nope"])


def test_a_cell_keeps_its_best_and_the_grid_keeps_different_cells():
    a = Archive(cfg())
    add(a, 1, 1.0, launches=1)
    add(a, 2, 2.0, launches=1)  # same cell, better: replaces 1 there
    add(a, 3, 0.5, launches=1)  # same cell, worse: stays out of the grid
    add(a, 4, 0.9, launches=4, dot=1)  # another cell
    cells = a.cells(0)
    assert sorted(e.id for e in cells.values()) == [2, 4]
    assert a.islands[0].members == {1, 2, 3, 4}
    assert a.islands[1].members == set()


def test_empty_island_asks_for_a_translation_and_failures_ask_for_repair():
    a = Archive(cfg())
    sel = a.select(0, random.Random(0))
    assert sel.parent_id is None and sel.how == "empty"
    add(a, 1, 0.02, ok=False)  # incorrect
    add(a, 2, 0.0, ok=False)  # compile error
    sel = a.select(0, random.Random(0))
    assert sel.how == "repair" and sel.parent_id in (1, 2) and not sel.parent_ok
    assert sel.inspiration_ids == []  # no correct program to show


def test_exploitation_prefers_high_scores_and_exploration_visits_cells():
    a = Archive(cfg(exploit_ratio=1.0, elite_k=3))
    for pid, score in [(1, 1.0), (2, 4.0), (3, 1.0), (4, 0.1)]:
        add(a, pid, score, launches=1 + pid % 2, dot=pid // 3)  # four distinct cells
    picks = Counter(a.select(0, random.Random(i)).parent_id for i in range(2000))
    assert set(picks) <= {1, 2, 3}  # only the elite_k best
    assert picks[2] > 2.5 * picks[1]  # weighted by score (4 : 1 : 1)
    a.cfg = cfg(exploit_ratio=0.0)
    picks = Counter(a.select(0, random.Random(i)).parent_id for i in range(2000))
    assert set(picks) == {1, 2, 3, 4}  # every cell's elite, uniformly
    assert min(picks.values()) > 350


def test_inspirations_are_top_then_diverse_and_never_the_parent():
    a = Archive(cfg(top_inspirations=2, diverse_inspirations=2, exploit_ratio=1.0, elite_k=1))
    for pid, score in [(1, 5.0), (2, 4.0), (3, 3.0), (4, 2.0), (5, 1.0)]:
        add(a, pid, score, launches=2**pid)  # distinct cells except the cap
    add(a, 6, 0.02, ok=False, launches=0)
    sel = a.select(0, random.Random(1))
    assert sel.parent_id == 1
    assert sel.top_ids == [2, 3]
    assert len(sel.diverse_ids) <= 2 and not set(sel.diverse_ids) & {1, 2, 3, 6}


def test_selection_is_reproducible_for_a_seed():
    a = Archive(cfg(exploit_ratio=0.5))
    for pid in range(1, 30):
        add(a, pid, (pid * 7919) % 13 / 3, launches=pid % 5, dot=pid % 2)
    first = [(s.parent_id, s.inspiration_ids) for s in (a.select(0, random.Random(f"7:{i}")) for i in range(50))]
    again = [(s.parent_id, s.inspiration_ids) for s in (a.select(0, random.Random(f"7:{i}")) for i in range(50))]
    assert first == again
    assert len({p for p, _ in first}) > 1


def test_ring_migration_every_interval():
    a = Archive(cfg(islands=3, migration_interval=4, migration_count=1))
    add(a, 100, 1.0, island=None)  # the start: on every island, not counted
    assert all(100 in isl.members for isl in a.islands) and a.added == 0
    add(a, 1, 3.0, island=0)
    add(a, 2, 2.0, island=1)
    add(a, 3, 0.02, ok=False, island=2)
    assert a.migrations == 0
    a.add(None, 2)  # an iteration without a program counts too
    assert a.migrations == 1
    assert 1 in a.islands[1].members  # island 0's best -> island 1
    assert 2 in a.islands[2].members  # island 1's best -> island 2
    assert 100 in a.islands[0].members and 3 not in a.islands[0].members  # island 2's best is the start
    assert 1 not in a.islands[2].members  # one hop per migration
    for pid in range(4, 8):
        add(a, pid, 0.5, island=0)
    assert a.migrations == 2 and 1 in a.islands[2].members  # the next migration carries it on


def test_no_migration_when_disabled_or_single_island():
    a = Archive(cfg(islands=1, migration_interval=1))
    add(a, 1, 1.0)
    add(a, 2, 2.0)
    assert a.migrations == 0
    b = Archive(cfg(islands=2, migration_interval=0))
    for pid in range(1, 20):
        add(b, pid, 1.0, island=0)
    assert b.islands[1].members == set()


def test_a_correct_program_holds_its_cell_over_any_failure_whatever_its_speedup():
    """A correct kernel at 0.01x scores below an incorrect one (0.02) and a flagged one (0.05);
    it still holds the cell, whichever came first, so exploration and the report see it."""
    from kernelsmith.evolve.program import FAILURE_SCORES, FLAGGED_SCORE

    for order in ([1, 2, 3], [3, 2, 1], [2, 3, 1]):
        a = Archive(cfg(exploit_ratio=0.0))
        for pid in order:
            score, ok = {1: (FAILURE_SCORES["incorrect"], False), 2: (FLAGGED_SCORE, False), 3: (0.01, True)}[pid]
            add(a, pid, score, ok=ok)
        (elite,) = a.cells(0).values()
        assert (elite.id, elite.ok) == (3, True), order
        assert {a.select(0, random.Random(i)).parent_id for i in range(50)} == {3}  # explore reaches it
        assert a.best_ids(5) == [3]
    # among failures the nearest miss holds the cell (a flagged program before an incorrect one)
    a = Archive(cfg())
    add(a, 1, FAILURE_SCORES["incorrect"], ok=False)
    add(a, 2, FLAGGED_SCORE, ok=False)
    assert [e.id for e in a.cells(0).values()] == [2]


def test_every_best_of_ranks_in_one_order(tmp_path):
    """The tuner's family leaders rank as the archive does: a success first, then the higher score,
    then the older. The store's best and the report's best are one rule (best_of): a success first,
    and a later one as fast is no gain, so the older stays."""
    from kernelsmith.evolve.program import Program, rank_key
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.evolve.tuning import TuningMemory
    from kernelsmith.report.run_data import best_of

    assert sorted([rank_key(False, 0.05, 1), rank_key(True, 0.01, 3), rank_key(True, 0.01, 2)]) == [
        rank_key(True, 0.01, 2),
        rank_key(True, 0.01, 3),
        rank_key(False, 0.05, 1),
    ]
    store = RunStore(tmp_path)
    for p in [
        Program(0, 0, "seed", "a", "correct", flags=["torch_compute_op"], score=0.05),
        Program(1, 0, "rewrite", "b", "incorrect", score=0.02),
        Program(2, 0, "rewrite", "c", "correct", speedup=0.01, score=0.01),
        Program(3, 0, "rewrite", "d", "correct", speedup=0.01, score=0.01),
    ]:
        store.add(p)
    assert store.best().iteration == 2 and best_of(store.all()).iteration == 2
    store.close()
    tuning = TuningMemory()
    tuning.record("family-a", {"BLOCK": 64}, 1.5, 7, True)
    tuning.record("family-b", {"BLOCK": 64}, 1.5, 4, True)  # as fast, and older: ranks first
    tuning.record("family-c", {"BLOCK": 64}, 2.0, 9, True)
    assert tuning.leader_ids() == [9, 4, 7]
