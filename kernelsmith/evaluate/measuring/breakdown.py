"""Where a forward's device time goes: each kernel it launched, per forward call, heaviest first,
from the CUDA profiler's activity records (CUPTI, through torch.profiler) of a few untimed calls the
sandbox makes after its timing run, alone on the device. (The correctness trials are recorded too,
but the judge runs the reference beside them: on the H200 a memory-bound kernel took 1.7x its
timed length there.) Library kernels a partial replacement keeps are in it, marked as such. On
the CPU there are no device kernels: the breakdown is empty there.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelsmith.evaluate.measuring.activity import Activity
from kernelsmith.evaluate.result import KernelRecord

LIMIT = 40  # kernels kept in a verdict, heaviest first


def kernel_breakdown(act: Activity, own: Callable[[str], bool], limit: int = LIMIT) -> tuple[list[KernelRecord], float]:
    """(records heaviest first, device ms of all kernels in one forward). `act` spans
    `act.windows` forward calls."""
    forwards = max(act.windows, 1)
    total_ns = sum(act.kernel_ns.values())
    names = sorted(act.kernels, key=lambda k: (-act.kernel_ns[k], -act.kernels[k], k))[:limit]
    records = [
        KernelRecord(
            name=k,
            count=act.kernels[k],
            own=own(k),
            device_ms=act.kernel_ns[k] / 1e6,
            calls=act.kernels[k] / forwards,
            ms=act.kernel_ns[k] / 1e6 / forwards,
            share=act.kernel_ns[k] / total_ns if total_ns else None,
        )
        for k in names
    ]
    return records, total_ns / 1e6 / forwards


def short_name(name: str, limit: int = 90) -> str:
    """A kernel's name as a reader needs it: no return type, no parameter list, long template
    arguments cut ('void at::native::elementwise_kernel<128, 2, ...>(int, ...)' ->
    'at::native::elementwise_kernel<128, 2, ...>')."""
    text = name.strip().removeprefix("void ")
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0 and text[i - 1] != " ":  # "Memcpy DtoD (Device -> Device)" stays
            text = text[:i]
            break
    return (
        text
        if len(text) <= limit
        else text[: limit - 4] + "...>"
        if "<" in text[: limit - 4]
        else text[: limit - 3] + "..."
    )
