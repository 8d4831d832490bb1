"""The physical floor of a task on this GPU: no honest kernel runs faster.

floor = max(bytes moved / measured copy bandwidth, FLOPs / measured dense bf16 matmul rate),
where bytes are each input read once and each output written once, and FLOPs are counted on
the reference by torch's FlopCounterMode (matmuls and convolutions). The ceilings are measured
once per GPU and cached beside the baselines; both are upper bounds of what kernels reach, so
the floor errs low (a candidate below it is impossible, not merely fast).
"""

from __future__ import annotations

import torch

# A candidate faster than this fraction of the floor is flagged: margin for timer noise.
FLOOR_MARGIN = 0.8


def measure_ceilings() -> dict:
    """Copy bandwidth (bytes read + written per second) and bf16 matmul FLOP/s on this GPU."""
    n = 2**30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")

    def best_ms(fn, reps: int) -> float:
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

    copy_ms = best_ms(lambda: dst.copy_(src), 10)
    mm_ms = best_ms(lambda: a @ b, 10)
    return {"bandwidth": 2 * n / (copy_ms / 1e3), "flops": 2 * 8192**3 / (mm_ms / 1e3)}


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


def floor_ms(task_bytes: int, task_flops: int, ceilings: dict) -> float:
    return 1e3 * max(task_bytes / ceilings["bandwidth"], task_flops / ceilings["flops"])
