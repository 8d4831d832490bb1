"""Dtypes between torch and flashinfer-bench, and how flashinfer-bench draws a `random` input.

flashinfer-bench names eleven dtypes (its `DType`) and maps them to torch's itself
(`dtype_str_to_torch_dtype`): the maps here are its own, less float4_e2m1 (torch packs it two to a byte,
so its tensors' shapes are not the Definition's). torch's others (float64, uint8, complex, ...) have no
name there, so a task holding one cannot be a Definition: `fib_dtype` says which value and why, in one
line. `draw` writes the code that draws a random input as flashinfer-bench's benchmark does
(flashinfer_bench/bench/utils.py `_rand_tensor`): the same calls, so the same values for the same seed (a
test holds them equal), written into the task because a task runs where flashinfer-bench may be absent
(a remote evaluator's sandbox).
"""

from __future__ import annotations

import torch
from flashinfer_bench.data.definition import DType
from flashinfer_bench.utils import dtype_str_to_torch_dtype

PACKED = {"float4_e2m1"}  # two values a byte in torch: a tensor of it has another shape than the Definition's
TORCH_OF_FIB: dict[str, torch.dtype] = {
    d.value: dtype_str_to_torch_dtype(d.value) for d in DType if d.value not in PACKED
}
FIB_OF_TORCH: dict[torch.dtype, str] = {dtype: name for name, dtype in TORCH_OF_FIB.items()}
# flashinfer-bench's integer ranges for a random input (its _rand_tensor)
INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024), "int64": (-1024, 1024)}
LOW_FLOATS = {"float8_e4m3fn", "float8_e5m2"}


class Unmappable(Exception):
    """A value of a task or a dataset that the other format cannot hold: the message says which and why."""


class TaskFails(Exception):
    """A task whose own code fails when it is run to be exported (its module code, get_inputs, Model or
    forward raises): the message says where and what it raised, in one line."""


def fib_dtype(dtype: torch.dtype, what: str) -> str:
    """flashinfer-bench's name of `dtype`; Unmappable (naming `what`) when it has none."""
    name = FIB_OF_TORCH.get(dtype)
    if name is None:
        known = ", ".join(FIB_OF_TORCH.values())
        raise Unmappable(
            f"{what} is {str(dtype).removeprefix('torch.')}, which flashinfer-bench has no dtype for ({known})"
        )
    return name


def torch_dtype(name: str, what: str) -> torch.dtype:
    """The torch dtype of flashinfer-bench's `name`; Unmappable for float4_e2m1 (packed two to a byte in torch,
    whose shape is then not the Definition's)."""
    dtype = TORCH_OF_FIB.get(name)
    if dtype is None:
        raise Unmappable(f"{what} is {name}, which kernelsmith cannot draw or check (torch packs it two to a byte)")
    return dtype


def name_of(dtype: object) -> str:
    """A Definition's dtype (flashinfer-bench's `DType`, a str Enum) as its plain name: "bfloat16"."""
    return str(getattr(dtype, "value", dtype))


def torch_name(name: str) -> str:
    """`torch.bfloat16` for "bfloat16": how generated code names the dtype."""
    return f"torch.{name}"


def draw(name: str, shape: str) -> str:
    """Code that draws a tensor of flashinfer-bench dtype `name` and shape `shape` (code) as its benchmark does."""
    dtype = torch_name(name)
    if name in LOW_FLOATS:
        return f"torch.randn({shape}).clamp(-2.0, 2.0).to({dtype})"
    if name == "bool":
        return f"torch.randint(0, 2, {shape}, dtype=torch.bool)"
    if name in INT_RANGES:
        low, high = INT_RANGES[name]
        return f"torch.randint({low}, {high}, {shape}, dtype={dtype})"
    return f"torch.randn({shape}, dtype={dtype})"


def draw_scalar(name: str) -> str:
    """Code for a random scalar input (shape null) of dtype `name`: a Python number, as flashinfer-bench's
    benchmark gives one (its random scalar is `.item()` of a 0-d draw)."""
    return f"{draw(name, '()')}.item()"
