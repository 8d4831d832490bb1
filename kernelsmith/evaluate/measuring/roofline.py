"""The physical floor (speed of light) of a task, a region or a forward on a card: no honest kernel runs faster.

floor = max(bytes moved / measured copy bandwidth, FLOPs / measured dense bf16 matmul rate) (`floor_ms`, the one
function that computes a floor), where bytes are each value read once and each output written once, and FLOPs
are counted by torch's formulas (FlopCounterMode's: matmuls, convolutions, attention; elementwise work counts
nothing). The ceilings are measured once per card by a copy and a GEMM probe (`measure_ceilings`) and cached
beside the baselines (`card_ceilings`), the datasheet's figures shown beside them (`DATASHEETS`); both measured
figures are upper bounds of what kernels reach, so the floor errs low (a candidate below it is impossible, not
merely fast).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

# A candidate faster than this fraction of the floor is flagged: margin for timer noise.
FLOOR_MARGIN = 0.8
CEILINGS = "ceilings"  # the cache key's first part: `ceilings|GPU|torch`


@dataclass(frozen=True)
class Datasheet:
    """A card's figures as its vendor gives them: memory bandwidth and dense bf16 (no sparsity) tensor rate."""

    part: str
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s


# By the name torch.cuda.get_device_name() gives, exactly (an H200 NVL or an H100 PCIe has other figures): shown
# beside the measured ceilings, never used for a floor. A card not listed has none.
DATASHEETS: dict[str, Datasheet] = {
    "NVIDIA H100 80GB HBM3": Datasheet("H100 SXM", 3.35e12, 989e12),
    "NVIDIA H200": Datasheet("H200 SXM", 4.8e12, 989e12),
    "NVIDIA A100-SXM4-80GB": Datasheet("A100 80GB SXM", 2.039e12, 312e12),
    "NVIDIA L40S": Datasheet("L40S", 0.864e12, 362e12),
}


@dataclass(frozen=True)
class Card:
    """A card's ceilings, measured by the probes (bytes/s of a copy, FLOP/s of a bf16 GEMM), its datasheet's beside."""

    name: str
    bandwidth: float
    flops: float
    datasheet: Datasheet | None = None

    @property
    def ceilings(self) -> dict:
        return {"bandwidth": self.bandwidth, "flops": self.flops}


def _best_ms(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return min(times)


def _probes(n: int, side: int) -> tuple[float, float]:
    """(ms of a copy of `n` bytes, ms of a `side`-cubed bf16 GEMM), each the best of 10."""
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    a = torch.randn(side, side, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(side, side, dtype=torch.bfloat16, device="cuda")
    return _best_ms(lambda: dst.copy_(src), 10), _best_ms(lambda: a @ b, 10)


def measure_ceilings() -> dict:
    """Copy bandwidth (bytes read + written per second) and bf16 matmul FLOP/s on this GPU."""
    n, side = 2**30, 8192
    copy_ms, mm_ms = _probes(n, side)
    torch.cuda.empty_cache()  # the probes' 2.25 GiB back to the card, for the model that runs after them
    return {"bandwidth": 2 * n / (copy_ms / 1e3), "flops": 2 * side**3 / (mm_ms / 1e3)}


def card_ceilings(gpu_name: str, torch_version: str, cache: BaselineCache | None) -> dict:
    """The card's measured ceilings: the cache's (per card and torch), else measured now and stored there.
    `cache=None`: measured, and no file read or written (--no-cache)."""
    key = f"{CEILINGS}|{gpu_name}|{torch_version}"
    stored = cache.get(key) if cache is not None else None
    if stored is not None:
        return stored
    measured = measure_ceilings()
    if cache is not None:
        cache.put(key, gpu_name, torch_version, "", measured)
    return measured


def this_card(cache: BaselineCache | None) -> Card | None:
    """This process's CUDA card with its ceilings (card_ceilings), or None where there is none (the CPU)."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    measured = card_ceilings(name, str(torch.__version__), cache)
    return Card(name, measured["bandwidth"], measured["flops"], DATASHEETS.get(name))


def stored_cards(cache: BaselineCache) -> list[tuple[str, Card]]:
    """Every card whose ceilings the cache holds, with the torch version they were measured under."""
    found = []
    for e in cache.entries():
        got = cache.get(e.key) if e.key.startswith(f"{CEILINGS}|") else None
        if got is not None and {"bandwidth", "flops"} <= got.keys():
            found.append((e.torch, Card(e.gpu, got["bandwidth"], got["flops"], DATASHEETS.get(e.gpu))))
    return found


def tensor_bytes(values) -> int:
    """Bytes of the distinct storages among `values` (nested lists/tuples of tensors)."""
    seen: dict[int, int] = {}

    def walk(v):
        if isinstance(v, torch.Tensor):
            seen[v.untyped_storage().data_ptr()] = v.untyped_storage().nbytes()
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(values)
    return sum(seen.values())


class _Reads(TorchDispatchMode):
    """The storages every op reads or writes."""

    def __init__(self):
        super().__init__()
        self.storages: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for x in pytree.tree_leaves((args, kwargs)):
            if isinstance(x, torch.Tensor):
                self.storages.add(x.untyped_storage().data_ptr())
        return func(*args, **kwargs)


def weights_read(model, inputs: list) -> list[torch.Tensor]:
    """The parameters and buffers of `model` that one forward on `inputs` reads (watched op by op): a weight
    the forward never touches is no byte a kernel must move."""
    weights = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    if not weights:
        return []
    watch = _Reads()
    with watch, torch.no_grad():
        model(*inputs)
    return [w for w in weights if w.untyped_storage().data_ptr() in watch.storages]


def view_extent(offset: int, shape: Iterable[int], stride: Iterable[int], itemsize: int) -> tuple[int, int, int]:
    """(first byte, bytes spanned, bytes held) of a view at `offset` elements into its storage."""
    shape, stride = list(shape), list(stride)
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0:
        return offset * itemsize, 0, 0
    last = sum((s - 1) * st for s, st in zip(shape, stride))  # torch's strides are never negative
    return offset * itemsize, (last + 1) * itemsize, numel * itemsize


def storage_bytes(extents: Iterable[tuple[int, int, int]]) -> int:
    """The least bytes of one storage that views at `extents` (view_extent's) touch, each byte once: the union
    of their spans, or the bytes they hold where that is less (a column slice spans every row's other columns)."""
    distinct = sorted(set(extents))
    held = sum(e[2] for e in distinct)
    union, end = 0, 0
    for start, span, _ in distinct:
        union += max(0, start + span - max(start, end))
        end = max(end, start + span)
    return min(union, held)


def count_flops(model, inputs) -> int:
    """FLOPs of one reference forward. Attention counts half: torch counts a causal
    scaled_dot_product_attention as if nothing were masked, and a floor must err low."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    attention = sum(
        n for op, n in counter.get_flop_counts().get("Global", {}).items() if "scaled_dot_product" in str(op)
    )
    return int(counter.get_total_flops() - attention // 2)


def _formula(func):
    """FlopCounterMode's formula for an aten op (the CPU's flash attention: the GPU's, same arguments), or None."""
    from torch.utils import flop_counter

    if func.overloadpacket.__name__ == "_scaled_dot_product_flash_attention_for_cpu":
        return flop_counter.flop_registry.get(torch.ops.aten._scaled_dot_product_flash_attention)
    return flop_counter.flop_registry.get(func.overloadpacket)


def counts_flops(func) -> bool:
    """Whether op_flops has a formula for the op (the others count 0)."""
    return _formula(func) is not None


def op_flops(func, args: tuple, kwargs: dict, out) -> int:
    """FLOPs of one aten op on `args` giving `out` (tensors, or meta tensors of their shapes) by FlopCounterMode's
    formulas (matmuls, convolutions, attention), attention half as in count_flops; other ops 0."""
    formula = _formula(func)
    if formula is None:
        return 0
    flops = int(formula(*args, **kwargs, out_val=out))
    return flops - flops // 2 if "scaled_dot_product" in func.overloadpacket.__name__ else flops


def floor_ms(task_bytes: int, task_flops: int, ceilings: dict) -> float:
    return 1e3 * max(task_bytes / ceilings["bandwidth"], task_flops / ceilings["flops"])


def of_floor(floor: float | None, measured_ms: float | None) -> float | None:
    """How close a time runs to its floor: floor / time (1.0 = at the speed of light); None without either."""
    if floor is None or not measured_ms or measured_ms <= 0:
        return None
    return floor / measured_ms


def amount(x: float, unit: str) -> str:
    """`x` in SI steps: 1.92 GB, 121 GFLOP, 3.01 TB/s (no unit: 121G)."""
    space = " " if unit else ""
    for step, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= step:
            return f"{x / step:.3g}{space}{prefix}{unit}"
    return f"{x:.3g}{space}{unit}"


def fraction(x: float | None) -> str:
    """A fraction of the floor (of_floor) as tables write it: 62%, 4.5%, 0.012% ("-": none)."""
    if x is None:
        return "-"
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"
