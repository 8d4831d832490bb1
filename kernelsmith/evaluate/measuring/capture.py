"""A CUDA graph's capture, and what a failed one leaves: the stream to capture on, the generators and
device put back, freed memory handed back to the GPU. Names bound at import, before any candidate code
runs in the process (as timing.py's)."""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch

_synchronize = torch.cuda.synchronize
_Stream = torch.cuda.Stream
_stream = torch.cuda.stream
_current_stream = torch.cuda.current_stream
_gc_collect = gc.collect
_cuda_available = torch.cuda.is_available
_empty_cache = torch.cuda.empty_cache


def stream_for(warm: Callable[[], object]) -> torch.cuda.Stream:
    """A stream to capture on, with `warm` run on it first: library handles and workspaces (cuBLAS,
    cuDNN) are made per stream, and making one inside a capture fails it (torch.cuda.graph's advice)."""
    stream = _Stream()
    stream.wait_stream(_current_stream())
    with _stream(stream):
        warm()
    _current_stream().wait_stream(stream)
    _synchronize()
    return stream


def reset_after_failed() -> None:
    """A capture that failed can leave torch's CUDA generators in graph-capture mode (seen on the
    H200, torch 2.11) and the device with a pending error: put both back."""
    try:
        _synchronize()
    except RuntimeError:
        pass
    for gen in getattr(torch.cuda, "default_generators", ()):
        try:
            gen.graphsafe_set_state(gen.clone_state())
        except (AttributeError, RuntimeError):
            pass


def release_memory() -> None:
    """Freed device memory back to the GPU (a failed graph's pool, a failed attempt's sets): the judge's
    process shares the GPU."""
    _gc_collect()
    if _cuda_available():
        _empty_cache()
