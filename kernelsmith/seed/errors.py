"""The one error of the seed step: why a task gets no seed, in one line."""

from __future__ import annotations

from kernelsmith.errors import UserError


class SeedError(UserError):
    """Inductor could not compile the task, or its code cannot be made a self-contained candidate."""


class NoOwnKernel(SeedError):
    """Inductor's code is library calls only (a plain GEMM or convolution): no Triton kernel to seed with."""
