"""The tape cut into the regions a kernel would fuse.

Library ops (GEMMs, attention, convolution, embedding: LIBRARY_OPS) cut the tape and are regions of
their own. Between two cuts, each group of ops joined by data flow (or by reading the same tensor) is a
region. Two regions inside one module call whose nested calls are all leaf modules (an MLP: its Linears
and its activation) merge when one feeds the other and the library ops between them do not depend on
the first (SiLU and the mul after the up projection). A region borrows the views that make its inputs
(the weight's `t`, a `view` of an activation), so its inputs are real tensors; regions of views and
tensor creation alone are dropped.

At several shapes (capture's `--shape`), each region of the main forward is found in the forward at each
other shape by where it runs and its ops (`align`): `Elsewhere` holds its tensors' shapes and its ops' int
arguments there, which name the extents that differ (sizes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelsmith.capture.tape import Ref, Tape
from kernelsmith.patch.pattern import GLUE

# One list: aten op names (overload packets) that a library kernel serves; a user may hand each one
# to kernelsmith as an operator of its own.
LIBRARY_OPS = frozenset(
    "mm addmm bmm baddbmm matmul linear addmv mv dot _scaled_mm _int_mm convolution _convolution "
    "cudnn_convolution mkldnn_convolution conv1d conv2d conv3d embedding embedding_bag _embedding_bag "
    "scaled_dot_product_attention _flash_attention_forward _efficient_attention_forward".split()
)


def packet(tape: Tape, i: int) -> str:
    return tape.ops[i].func.overloadpacket.__name__


def is_library(tape: Tape, i: int) -> bool:
    name = packet(tape, i)
    return name in LIBRARY_OPS or name.startswith("_scaled_dot_product")


def is_glue(tape: Tape, i: int) -> bool:
    """Views, tensor creation (no tensor read) and ops that return no tensor: no kernel work of note."""
    op = tape.ops[i]
    return bool(op.func.is_view or packet(tape, i) in GLUE or not op.reads or not op.writes)


@dataclass
class Region:
    ops: list[int]  # the ops it owns (tape indices): their time is its time
    replay: list[int]  # what its task runs: its ops and the views it borrowed
    inputs: list[tuple[int, int]]  # (tid, version read), in the order first read
    outputs: list[tuple[int, int]]  # (tid, version after the region)
    written_inputs: list[int]  # inputs it writes in place: the task clones them first
    call: int | None  # the innermost module call that holds all its ops
    library: bool
    # A region across the library boundary (capture/fused): "prologue", "epilogue", "siblings", "attention" or
    # two joined by "+" ("siblings+epilogue": gate and up projections with the SiLU-mul after them); "" for the
    # split regions above, which the library ops cut.
    fused: str = ""


class Graph:
    def __init__(self, tape: Tape):
        self.tape = tape
        writer: dict[tuple[int, int], int] = {}
        for op in tape.ops:
            for tid, ver in op.writes.items():
                writer[(tid, ver)] = op.index
        self.deps: list[set[int]] = []
        last_storage_write: dict[int, int] = {}
        for op in tape.ops:
            d: set[int] = set()
            for tid, ver in op.reads.items():
                if (tid, ver) in writer:
                    d.add(writer[(tid, ver)])
                storage = tape.meta[tid].storage
                w = last_storage_write.get(storage) if storage is not None else None
                if w is not None and w >= tape.creator.get(tid, -1):
                    d.add(w)  # written through an alias after this tensor was made
            self.deps.append(d)
            for tid in op.mutated:
                storage = tape.meta[tid].storage
                if storage is not None:
                    last_storage_write[storage] = op.index
        self.users: list[set[int]] = [set() for _ in tape.ops]
        for i, d in enumerate(self.deps):
            for j in d:
                self.users[j].add(i)

    def depends_on(self, i: int, group: set[int]) -> bool:
        todo, seen = [i], set()
        while todo:
            j = todo.pop()
            for d in self.deps[j]:
                if d in group:
                    return True
                if d not in seen and d > min(group):
                    seen.add(d)
                    todo.append(d)
        return False


def ancestors(tape: Tape, call: int | None) -> list[int]:
    out = []
    while call is not None:
        out.append(call)
        call = tape.calls[call].parent
    return out


def common_call(tape: Tape, ops: list[int]) -> int | None:
    chains = [ancestors(tape, tape.ops[i].call) for i in ops]
    common = set(chains[0]).intersection(*map(set, chains[1:]))
    return next((c for c in chains[0] if c in common), None)


def _is_block(tape: Tape, call: int | None) -> bool:
    """A module call below the root whose nested calls are all leaf modules (an MLP, an attention)."""
    if call is None or tape.calls[call].parent is None:
        return False
    return all(not c.has_children for c in tape.calls if c.parent == call)


def _components(tape: Tape, g: Graph, seg: list[int]) -> list[list[int]]:
    parent = {i: i for i in seg}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_reader: dict[int, int] = {}
    for i in seg:
        for d in g.deps[i]:
            if d in parent:
                parent[find(i)] = find(d)
        for tid in tape.ops[i].reads:
            if tid in first_reader:
                parent[find(i)] = find(first_reader[tid])
            first_reader.setdefault(tid, i)
    groups: dict[int, list[int]] = {}
    for i in seg:
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _groups(tape: Tape, g: Graph) -> list[tuple[list[int], bool]]:
    groups: list[tuple[list[int], bool]] = []
    seg: list[int] = []
    for i in range(len(tape.ops)):
        if is_library(tape, i):
            groups += [(c, False) for c in _components(tape, g, seg)] + [([i], True)]
            seg = []
        else:
            seg.append(i)
    groups += [(c, False) for c in _components(tape, g, seg)]
    groups = [(ops, lib) for ops, lib in groups if lib or not all(is_glue(tape, i) for i in ops)]
    groups.sort(key=lambda x: x[0][0])
    merged: list[tuple[list[int], bool]] = []
    for ops, lib in groups:
        for k, (prev, prev_lib) in enumerate(merged):
            if lib or prev_lib or not any(d in prev for i in ops for d in g.deps[i]):
                continue
            both = sorted(prev + ops)
            call = common_call(tape, both)
            between = [j for j in range(prev[-1] + 1, ops[0]) if j not in both]
            if (
                _is_block(tape, call)
                and all(call in ancestors(tape, tape.ops[j].call) for j in between)
                and not any(g.depends_on(j, set(prev)) for j in between)
            ):
                merged[k] = (both, False)
                break
        else:
            merged.append((ops, lib))
    return merged


def _borrow_views(tape: Tape, g: Graph, ops: list[int]) -> list[int]:
    replay, todo = set(ops), list(ops)
    while todo:
        for d in g.deps[todo.pop()]:
            if d not in replay and is_glue(tape, d) and not tape.ops[d].mutated and not is_library(tape, d):
                replay.add(d)
                todo.append(d)
    return sorted(replay)


def find_regions(tape: Tape) -> list[Region]:
    g = Graph(tape)
    return [make_region(tape, ops, _borrow_views(tape, g, ops), lib) for ops, lib in _groups(tape, g)]


def make_region(tape: Tape, ops: list[int], replay: list[int], lib: bool, fused: str = "") -> Region:
    """The region that owns `ops` and replays `replay` (its ops and the views it borrows): its inputs, the
    values read after it (or its last op's), the inputs it writes in place and the module call holding it."""
    inside = set(replay)
    inputs: dict[int, int] = {}
    for i in replay:
        for tid, ver in tape.ops[i].reads.items():
            if tape.creator.get(tid) not in inside:
                inputs.setdefault(tid, ver)
    written = sorted({tid for i in replay for tid in tape.ops[i].mutated if tid in inputs})
    last_write: dict[int, int] = {}
    for i in ops:
        last_write |= tape.ops[i].writes
    used_after = {tid for j, op in enumerate(tape.ops) if j not in inside and j > ops[0] for tid in op.reads}
    outputs = [(t, v) for t, v in last_write.items() if t in used_after or t in tape.live_out]
    if not outputs:  # nothing read later: what its last op made stands for it
        outputs = list(tape.ops[max(ops)].writes.items())
    compute = [i for i in ops if lib or not is_glue(tape, i)]  # views at its edges say nothing of where
    return Region(ops, replay, list(inputs.items()), outputs, written, common_call(tape, compute), lib, fused)


def int_leaves(args: tuple, kwargs: dict) -> list[int]:
    """An op's int arguments (not bools), in the order a task writes them (write_task._render_arg)."""
    found: list[int] = []

    def walk(x) -> None:
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, int) and not isinstance(x, bool):
            found.append(x)

    walk(args)
    walk(list(kwargs.values()))
    return found


@dataclass
class Elsewhere:
    """A region of the main forward at the other shapes where it was found: per shape, each of its tensors'
    shape there (by the main tape's tid) and each op's int arguments there (by the main tape's op index)."""

    at: list[int] = field(default_factory=list)  # the other shapes it was found at (their index in --shape less 1)
    shapes: list[dict[int, tuple[int, ...]]] = field(default_factory=list)
    ints: list[dict[int, list[int]]] = field(default_factory=list)
    regions: list[tuple[Tape, Region]] = field(default_factory=list)  # the region there, to check its task on
    why: dict[int, str] = field(default_factory=dict)  # another shape it was not found at -> why

    def drop(self, whys: dict[int, str]) -> None:
        """Leaves out the shapes of `whys` (by their place in `at`), each with why."""
        self.why |= {self.at[m]: why for m, why in whys.items()}
        keep = [m for m in range(len(self.at)) if m not in whys]
        self.at, self.shapes = [self.at[m] for m in keep], [self.shapes[m] for m in keep]
        self.ints, self.regions = [self.ints[m] for m in keep], [self.regions[m] for m in keep]

    def key(self, main: int, tid: int, d: int) -> tuple[int, ...]:
        """Dimension `d` of tensor `tid` (of size `main` here) at every shape, the main one first."""
        return (main, *(s[tid][d] for s in self.shapes))


def _signature(tape: Tape, region: Region) -> tuple:
    path = tape.calls[region.call].path if region.call is not None else ""
    return path, tuple(str(tape.ops[i].func) for i in region.replay)


def align(tape: Tape, regions: list[Region], others: list[tuple[Tape, list[Region]]]) -> list[Elsewhere]:
    """Each region of `regions` (the main tape's) at each other shape: the region of the same module path and
    ops there, in the order they ran (the k-th such region of the main forward is the k-th there)."""
    found = [Elsewhere() for _ in regions]
    for j, (there, theirs) in enumerate(others):
        queue: dict[tuple, list[Region]] = {}
        for r in theirs:
            queue.setdefault(_signature(there, r), []).append(r)
        for region, elsewhere in zip(regions, found):
            same = queue.get(_signature(tape, region))
            other = same.pop(0) if same else None
            why = "its ops do not run there" if other is None else _mapped(tape, region, there, other, elsewhere)
            if why is not None:
                elsewhere.why[j] = why
            else:
                elsewhere.at.append(j)
                elsewhere.regions.append((there, other))  # pyright: ignore[reportArgumentType]
    return found


def _mapped(tape: Tape, region: Region, there: Tape, other: Region, elsewhere: Elsewhere) -> str | None:
    """Notes the region's sizes at the other shape in `elsewhere` (None), or says why they do not line up."""
    pairs = [(a, b) for (a, _), (b, _) in zip(region.inputs, other.inputs)]
    ints: dict[int, list[int]] = {}
    for i, k in zip(region.replay, other.replay):
        mine, theirs = tape.ops[i], there.ops[k]
        leaves = lambda out: [r.tid for r in _refs(out)]
        pairs += list(zip(leaves(mine.out), leaves(theirs.out)))
        ints[i] = int_leaves(theirs.args, theirs.kwargs)
        if len(ints[i]) != len(int_leaves(mine.args, mine.kwargs)) or len(leaves(mine.out)) != len(leaves(theirs.out)):
            return f"its op {mine.name} takes other arguments there"
    if len(region.inputs) != len(other.inputs):
        return "it reads other tensors there"
    shapes = {a: there.meta[b].shape for a, b in pairs}
    if any(len(shapes[a]) != len(tape.meta[a].shape) for a in shapes):
        return "its tensors have other ranks there"
    elsewhere.shapes.append(shapes)
    elsewhere.ints.append(ints)
    return None


def _refs(out) -> list[Ref]:
    if isinstance(out, Ref):
        return [out]
    if isinstance(out, (list, tuple)):
        return [r for x in out for r in _refs(x)]
    return []
