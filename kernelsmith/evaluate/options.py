"""Evaluation options: one definition of every default, read by the CLI and the Python API."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from kernelsmith.errors import UserError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str | int) -> int:
    """'3G' -> bytes. Binary units; a bare number is bytes."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise UserError(f"bad size {text!r}: use a number with an optional unit, e.g. 512M or 3G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class EvalOptions(BaseModel):
    device: str = "cuda"
    trials: int = Field(default=5, ge=1, le=1000)
    timeout: float = Field(default=180.0, gt=0, description="wall-clock seconds per candidate")
    memory_limit: int = Field(default=8 * 2**30, description="host memory (RSS) per candidate, bytes")
    atol: float | None = None  # None: by output dtype (see checks.tolerances)
    rtol: float | None = None
    # None: on for CUDA; off for the CPU, where inductor's C++ build costs ~40 s per task
    # and interpreter timings are relative only.
    compile_baseline: bool | None = None
    # The operator rule (docs/integrity.md): "partial" (KernelBench's) lets a candidate keep library
    # operators for part of the work and fails one whose own kernels do none of the reference's
    # work; "none" fails any library compute in forward.
    torch_ops: Literal["partial", "none"] = "partial"
    use_baseline_cache: bool = True
    # Timing: reps grow until `timing_budget_ms` of samples, within [min_reps, max_reps].
    warmup_ms: float = 100.0
    timing_budget_ms: float = 400.0
    min_reps: int = Field(default=20, ge=1)
    max_reps: int = Field(default=1000, ge=1)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if v not in ("cuda", "cpu"):
            raise ValueError("device must be 'cuda' or 'cpu'")
        return v

    @field_validator("memory_limit", mode="before")
    @classmethod
    def _mem(cls, v):
        return parse_size(v)

    @property
    def wants_compile_baseline(self) -> bool:
        return self.device == "cuda" if self.compile_baseline is None else self.compile_baseline

    def effective_timing(self) -> "EvalOptions":
        """On the CPU (Triton interpreter) timings are relative only: few repetitions."""
        if self.device == "cpu":
            return self.model_copy(update=dict(warmup_ms=0.0, timing_budget_ms=0.0, min_reps=3, max_reps=3))
        return self
