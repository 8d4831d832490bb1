"""Each region's speed of light: the least bytes it must move and its FLOPs, read off the tape (nothing runs
again), and its floor on the card as a fraction of its measured time; the whole forward's alike, as one region
of every op. The floor and the card's ceilings are the judge's (kernelsmith/evaluate/measuring/roofline.py:
floor_ms, measured once per card and cached); on the CPU there is no card, and no floor.

Bytes. Each storage the region did not make counts once, at the views its ops read (a slice of the KV cache is
that slice) and those they write in place; an indexed write (index_copy_, index_put_, scatter_: the KV cache
append) writes its source's bytes, not the whole target's, and a gather (an embedding's lookup, index_select)
reads as many of its table's elements as it outputs. A storage read and written in place counts once.
Each value the region makes that the model uses after it (or returns) counts once, written. Views, tensor
creation and other glue move nothing. FLOPs: torch's formulas op by op (FlopCounterMode's: matmuls,
convolutions, attention, half of it as the judge counts it); elementwise work counts none. Both err low, as a
floor must.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from kernelsmith.capture.regions import Region, is_glue
from kernelsmith.capture.tape import Ref, Tape
from kernelsmith.evaluate.measuring import roofline
from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

# In-place writes at indices: they write as many elements as their source (or index) holds, not their target
_INDEXED = frozenset(
    "index_copy index_put _index_put_impl index_add index_fill scatter scatter_add scatter_reduce".split()
)
_SOURCES = ("source", "values", "src", "index")  # the argument whose size an indexed write writes, first found
# Reads at indices: they read at most an element of their table per element of their output, not the table
_GATHERS = frozenset("embedding index_select gather index take".split())


@dataclass(frozen=True)
class Work:
    bytes: int = 0
    flops: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.bytes + other.bytes, self.flops + other.flops)


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _named(op) -> dict:
    return dict(zip([a.name for a in op.func._schema.arguments], op.args)) | op.kwargs


def _first_part(tape: Tape, tid: int, elements: int) -> tuple[int, int, int]:
    """The extent of `elements` of view `tid` (placed at its start: where they lie is the data's)."""
    m = tape.meta[tid]
    held = min(elements, _numel(m.shape)) * m.dtype.itemsize
    return m.offset * m.dtype.itemsize, held, held


def _written_extent(tape: Tape, op, tid: int) -> tuple[int, int, int] | None:
    """What an indexed in-place write writes into `tid`: as many of its elements as its source holds, or None
    for another op (it writes the whole view)."""
    if op.func.overloadpacket.__name__.rstrip("_") not in _INDEXED:
        return None
    named = _named(op)
    source = next((named[n] for n in _SOURCES if isinstance(named.get(n), Ref)), None)
    return None if source is None else _first_part(tape, tid, _numel(tape.meta[source.tid].shape))


def _read_extent(tape: Tape, op, tid: int) -> tuple[int, int, int] | None:
    """What a gather (an embedding, index_select, advanced indexing) reads of its table `tid`: at most an element
    per element of its output, not the table; None for another op or argument (it reads the whole view)."""
    if op.func.overloadpacket.__name__ not in _GATHERS:
        return None
    named = _named(op)
    table = next((named[n] for n in ("weight", "self") if isinstance(named.get(n), Ref)), None)
    outs = [r for r in pytree.tree_leaves(op.out) if isinstance(r, Ref)]
    if table is None or table.tid != tid or not outs:
        return None
    return _first_part(tape, tid, _numel(tape.meta[outs[0].tid].shape))


def _flops(tape: Tape, op) -> int:
    """The op's FLOPs by torch's formulas, on meta tensors of its recorded shapes (0 where a formula fails on
    them: the floor errs low)."""
    if not roofline.counts_flops(op.func):
        return 0

    def meta(x):
        if not isinstance(x, Ref):
            return x
        m = tape.meta[x.tid]
        return torch.empty_strided(m.shape, m.stride, dtype=m.dtype, device="meta")

    args, kwargs, out = (pytree.tree_map(meta, v) for v in (op.args, op.kwargs, op.out))
    try:
        return roofline.op_flops(op.func, args, kwargs, out)
    except Exception:
        return 0


class TapeWork:
    """The work of pieces of one tape (module docstring): the ops that made each storage, found once."""

    def __init__(self, tape: Tape):
        self.tape = tape
        self.maker: dict[object, int | None] = {}  # storage -> the op that made it (None: from outside)
        for tid in sorted(tape.meta):
            self.maker.setdefault(self._storage(tid), tape.creator.get(tid))

    def _storage(self, tid: int) -> object:
        storage = self.tape.meta[tid].storage
        return storage if storage is not None else ("tensor", tid)

    def of(self, ops: Iterable[int], outputs: Iterable[int]) -> Work:
        """The least bytes and the FLOPs of the ops `ops` (tape indices) whose values `outputs` (tids) the
        model uses after them."""
        tape, inside = self.tape, set(ops)
        made = lambda tid: self.maker.get(self._storage(tid)) in inside
        # values its ops wrote (a view writes nothing: what is read through it comes from where its base does)
        made_here = {(tid, ver) for i in inside if not is_glue(tape, i) for tid, ver in tape.ops[i].writes.items()}
        touched: dict[object, set[tuple[int, int, int]]] = {}

        def touch(tid: int, extent: tuple[int, int, int] | None = None) -> None:
            m = tape.meta[tid]
            view = extent or roofline.view_extent(m.offset, m.shape, m.stride, m.dtype.itemsize)
            touched.setdefault(self._storage(tid), set()).add(view)

        flops = 0
        for i in sorted(inside):
            op = tape.ops[i]
            flops += _flops(tape, op)
            if is_glue(tape, i):
                continue
            for tid, ver in op.reads.items():  # what it reads from outside, but what it writes in place
                if tid not in op.mutated and not made(tid) and (tid, ver) not in made_here:
                    touch(tid, _read_extent(tape, op, tid))
            for tid in op.mutated:
                if not made(tid):
                    touch(tid, _written_extent(tape, op, tid))
        for tid in outputs:
            if made(tid):
                touch(tid)
        return Work(sum(roofline.storage_bytes(views) for views in touched.values()), flops)

    def regions(self, regions: Iterable[Region]) -> Work:
        """The work of every call of a task's region in one forward (capture's time_us is theirs too)."""
        total = Work()
        for r in regions:
            total += self.of(r.replay, [tid for tid, _ in r.outputs])
        return total

    def forward(self) -> Work:
        """The whole forward's: every weight, buffer and input it reads, once; its outputs (and the values it
        leaves in its inputs' objects, a KV cache) written once."""
        return self.of(range(len(self.tape.ops)), self.tape.live_out)


def floor_of(w: Work, card: roofline.Card | None, measured_ms: float | None) -> tuple[float | None, float | None]:
    """(floor_ms, of_floor): the work's floor on the card and the fraction of it a measured time reaches (floor
    over time: 1.0 runs at the speed of light); (None, None) without a card."""
    if card is None:
        return None, None
    floor = roofline.floor_ms(w.bytes, w.flops, card.ceilings)
    return floor, roofline.of_floor(floor, measured_ms)


@dataclass
class SpeedOfLight:
    """The forward's speed of light as capture.json holds it (`speed_of_light`): its work, its floor on the card
    and the card's ceilings, measured and its datasheet's (None: no card, the CPU, or no datasheet)."""

    bytes: int
    flops: int
    floor_ms: float | None = None
    of_floor: float | None = None  # floor over the forward's profiled time (median; on CUDA its device time)
    card: str | None = None  # the card's name
    bandwidth: float | None = None  # measured copy bandwidth, bytes/s
    peak_flops: float | None = None  # measured dense bf16 GEMM rate, FLOP/s
    datasheet: str | None = None  # the part its datasheet names
    datasheet_bandwidth: float | None = None
    datasheet_flops: float | None = None
    no_floor: str | None = None  # why there is no floor: "no card (the CPU)", or why its ceilings were not measured

    @classmethod
    def of(cls, w: Work, card: roofline.Card | None, measured_ms: float | None, why: str | None = None):
        """`why`: why there is no card, where `card` is None."""
        floor, frac = floor_of(w, card, measured_ms)
        sol = cls(w.bytes, w.flops, floor, frac, no_floor=None if card is not None else why or "no card")
        if card is not None:
            sol.card, sol.bandwidth, sol.peak_flops = card.name, card.bandwidth, card.flops
            if card.datasheet is not None:
                ds = card.datasheet
                sol.datasheet, sol.datasheet_bandwidth, sol.datasheet_flops = ds.part, ds.bandwidth, ds.flops
        return sol

    def said(self) -> str:
        """The forward's speed of light in one line."""
        amount = roofline.amount
        work = f"the forward moves at least {amount(self.bytes, 'B')} and does {amount(self.flops, 'FLOP')}"
        if self.card is None or self.floor_ms is None:
            return f"speed of light: {work}; {self.no_floor or 'no card'}: no floor"
        measured = f"{amount(self.bandwidth or 0, 'B/s')}, {amount(self.peak_flops or 0, 'FLOP/s')}"
        if self.datasheet is not None:
            measured += f"; datasheet ({self.datasheet}): {amount(self.datasheet_bandwidth or 0, 'B/s')}, "
            measured += amount(self.datasheet_flops or 0, "FLOP/s")
        runs = f"; the forward runs at {roofline.fraction(self.of_floor)} of it" if self.of_floor is not None else ""
        return f"speed of light: {work}: {self.floor_ms:.3g} ms on {self.card} (measured {measured}){runs}"


def card_of(device: str) -> tuple[roofline.Card | None, str | None]:
    """The card the model ran on, with its measured ceilings (cached per card beside the judge's baselines, so
    measured once); or None and why: the CPU has no card, and a model that leaves no room for the probes (2.25 GiB)
    is captured without a floor."""
    if device != "cuda":
        return None, "no card (the CPU)"
    try:
        return roofline.this_card(BaselineCache()), None
    except torch.cuda.OutOfMemoryError:
        return None, "no room on the card to measure its ceilings (its probes take 2.25 GiB)"


def with_floor(task, work: Work, card: roofline.Card | None) -> None:
    """Sets a captured task's (run.CapturedTask) bytes, FLOPs, floor and fraction of it from its `work`."""
    task.bytes, task.flops = work.bytes, work.flops
    task.floor_ms, task.of_floor = floor_of(work, card, task.time_us / 1e3)
