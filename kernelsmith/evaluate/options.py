"""Evaluation options: one definition of every default, read by the CLI and the Python API."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, LiteralString, cast

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kernelsmith.device import DEVICES
from kernelsmith.errors import UserError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# A sandbox is Python + torch before the candidate allocates anything (~0.3 GiB resident, measured):
# a limit below this blames every candidate for the judge's own footprint.
MIN_MEMORY_LIMIT = 512 * 2**20
MAX_MEMORY_LIMIT = 2**50  # 1 PiB: more than any host has; a larger value is a typo


def parse_size(text: str | int) -> int:
    """'3G' -> bytes. Binary units; a bare number is bytes."""
    if isinstance(text, bool) or text is None:
        raise UserError(f"bad size {text!r}: use a number with an optional unit, e.g. 512M or 3G")
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise UserError(f"bad size {text!r}: use a number with an optional unit, e.g. 512M or 3G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _size_text(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n % _UNITS[unit.lower()] == 0:
            return f"{n // _UNITS[unit.lower()]}{unit}"
    return str(n)


def cache_dir() -> Path:
    """The evaluator's folder of files kept between runs: the baseline cache, builds/, logs/
    (KERNELSMITH_CACHE_DIR, else $XDG_CACHE_HOME/kernelsmith or ~/.cache/kernelsmith)."""
    root = os.environ.get("KERNELSMITH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelsmith"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)  # the folder holds logs and builds too
    return path


def memory_limit_bytes(value: str | int) -> int:
    """A memory limit in bytes, within [MIN_MEMORY_LIMIT, MAX_MEMORY_LIMIT]; else UserError."""
    n = parse_size(value)
    if n < MIN_MEMORY_LIMIT:
        raise UserError(
            f"{value!r} is below the least memory limit, {_size_text(MIN_MEMORY_LIMIT)}: the sandbox "
            "alone (Python and torch) takes about 0.3G, and a smaller limit blames every candidate"
        )
    if n > MAX_MEMORY_LIMIT:
        raise UserError(f"{value!r} is more memory than any host has (at most {_size_text(MAX_MEMORY_LIMIT)})")
    return n


class EvalOptions(BaseModel):
    device: str = "cuda"
    # Every value is checked here, once, for the CLI, config files and the service alike: finite,
    # in range (a negative tolerance turns a correct kernel incorrect; NaN breaks every comparison).
    trials: int = Field(default=5, ge=1, le=1000)
    timeout: float = Field(default=180.0, gt=0, allow_inf_nan=False, description="wall-clock seconds per candidate")
    # A CUDA C++ build (load_inline) has its own limit; the candidate's `timeout` starts after it.
    build_timeout: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="wall-clock seconds for the candidate's builds"
    )
    memory_limit: int = Field(default=8 * 2**30, description="host memory (RSS) per candidate, bytes")
    atol: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # None: by output dtype (checks.tolerances)
    rtol: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    # None: on for CUDA; off for the CPU, where inductor's C++ build costs ~40 s per task
    # and interpreter timings are relative only.
    compile_baseline: bool | None = None
    # The operator rule (docs/integrity.md): "partial" (KernelBench's) lets a candidate keep library
    # operators for part of the work and fails one whose own kernels do none of the reference's
    # work; "none" fails any library compute in forward.
    torch_ops: Literal["partial", "none"] = "partial"
    # False (--no-cache): the baseline cache is neither read nor written. The judge still times a
    # task's baselines once and compares its later candidates against the same figures.
    use_baseline_cache: bool = True
    # False: this verdict times the reference and torch.compile anew, taking neither the cache's figures
    # nor those the judge measured for an earlier verdict (a benchmark of the baselines' own spread).
    reuse_baselines: bool = True
    # Device time with the L2 flushed before every call ("cold", the default: no call finds its inputs
    # left in the cache by the one before) or not ("warm": as in a stream of back-to-back kernels).
    l2: Literal["cold", "warm"] = "cold"
    # Timing: reps grow until `timing_budget_ms` of samples, within [min_reps, max_reps].
    warmup_ms: float = Field(default=100.0, ge=0, allow_inf_nan=False)
    timing_budget_ms: float = Field(default=400.0, ge=0, allow_inf_nan=False)
    min_reps: int = Field(default=20, ge=1)
    max_reps: int = Field(default=1000, ge=1)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if v not in DEVICES:
            raise ValueError("device must be 'cuda' or 'cpu'")
        return v

    @field_validator("memory_limit", mode="before")
    @classmethod
    def _mem(cls, v):
        try:
            return memory_limit_bytes(v)
        except UserError as exc:  # pydantic reports ValueErrors only: a UserError would escape as a crash
            raise PydanticCustomError("memory_limit", cast(LiteralString, str(exc))) from None

    @model_validator(mode="after")
    def _reps(self) -> EvalOptions:
        if self.min_reps > self.max_reps:
            message = f"min_reps ({self.min_reps}) is above max_reps ({self.max_reps})"
            raise PydanticCustomError("reps", cast(LiteralString, message))
        return self

    @property
    def wants_compile_baseline(self) -> bool:
        return self.device == "cuda" if self.compile_baseline is None else self.compile_baseline

    def effective_timing(self) -> EvalOptions:
        """On the CPU (Triton interpreter) timings are relative only: few repetitions."""
        if self.device == "cpu":
            return self.model_copy(update=dict(warmup_ms=0.0, timing_budget_ms=0.0, min_reps=3, max_reps=3))
        return self
