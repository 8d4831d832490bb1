"""Memory a candidate could find right values in, overwritten before each correctness call.

A kernel that leaves part of its output unwritten (`torch.empty`, every other element stored) passes
wherever the allocator hands it a block that still holds the right values: the reference's freed output
in a harness that runs both in one process, or its own earlier output on the same inputs. The reference
never runs in the sandbox; the second case is what this answers. Each correctness trial calls forward
twice on the same inputs (runner/sandbox.py): before the first, the free memory the allocator keeps is
filled with POISON; before the second, the first call's outputs are too, in place, then let go. A
partial writer then returns NaN where it wrote nothing, which no tolerance passes, while a kernel whose
results vary in their last bits (atomics) is held to the tolerance as before: both calls are checked.

POISON is a byte pattern: 0xFF in every byte is NaN in every floating dtype (float64/32, half, bfloat16,
float8), -1 in signed integers, the maximum in unsigned ones.

CUDA: every free block of PyTorch's caching allocator on the caller's stream or the default stream, found
in its snapshot, is allocated, filled and freed (a graph's or a MemPool's private pool, and blocks on other
streams, are left alone). CPU: the allocator is malloc, whose free lists cannot be listed; buffers the size
of the last outputs are filled and freed, which malloc hands back first for requests of that size.
"""

from __future__ import annotations

import torch

from kernelsmith.evaluate.checks import flatten_outputs

POISON = 0xFF
SMALL_POOL_MAX = 1 << 20  # the caching allocator serves requests up to 1 MiB from its small pool
MAX_GROWTH = 256 * 2**20  # the most device memory poisoning may add where a block is not found as listed

# Bound at import, before any candidate code runs in the sandbox.
_empty = torch.empty
_fill = torch.Tensor.fill_
_snapshot = torch.cuda.memory_snapshot
_reserved = torch.cuda.memory_reserved
_current_stream = torch.cuda.current_stream
_default_stream = torch.cuda.default_stream
_stream = torch.cuda.stream


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under `t`, as bytes."""
    return _empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def fill_outputs(out, keep: list) -> list[int]:
    """Fill the storages of `out`'s tensors with POISON in place, except storages that any tensor in `keep`
    (the inputs, the model's parameters and buffers) shares: a forward that returns an input or a weight
    must find it intact. Returns the byte sizes of the storages filled."""
    kept = {_storage_ptr(t) for t in keep if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes()}
    filled: list[int] = []
    for leaf in flatten_outputs(out):
        if type(leaf) is not torch.Tensor or leaf.layout != torch.strided or leaf.untyped_storage().nbytes() == 0:
            continue
        ptr = _storage_ptr(leaf)
        if ptr in kept:
            continue
        kept.add(ptr)  # two outputs on one storage: filled once
        raw = _storage_bytes(leaf)
        _fill(raw, POISON)
        filled.append(raw.numel())
    return filled


def fill_free_memory(device: str, sizes: list[int]) -> int:
    """Fill the memory the allocator keeps free with POISON (see the module's docstring); `sizes`: the
    byte sizes of the last outputs (the CPU's stand-in for a list of free blocks). Returns the bytes filled."""
    if device != "cuda":
        held = [_empty(n, dtype=torch.uint8) for n in sizes if n > 0]
        for buf in held:
            _fill(buf, POISON)
        return sum(b.numel() for b in held)
    current, default = _current_stream(), _default_stream()
    streams = {current.cuda_stream: current, default.cuda_stream: default}
    blocks = []
    for seg in _snapshot():
        if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0) or seg.get("stream") not in streams:
            continue
        small = seg.get("segment_type") == "small"
        for block in seg.get("blocks", ()):
            if block.get("state") == "inactive" and block.get("size", 0) > 0:
                blocks.append((int(block["size"]), small, seg["stream"]))
    held: list[torch.Tensor] = []
    start = _reserved()
    try:
        for size, small, stream in sorted(blocks, reverse=True):  # largest first: each takes a block its size
            with _stream(streams[stream]):
                left = size
                while left > 0 and _reserved() - start <= MAX_GROWTH:
                    piece = min(left, SMALL_POOL_MAX) if small else left
                    buf = _empty(piece, dtype=torch.uint8, device="cuda")
                    _fill(buf, POISON)
                    held.append(buf)
                    left -= piece
    except torch.OutOfMemoryError:  # what was filled stays filled; the rest is left as it is
        pass
    return sum(b.numel() for b in held)  # freed on return, on the streams they were filled on
