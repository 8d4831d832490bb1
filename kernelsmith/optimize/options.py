"""What `kernelsmith optimize` is told: every setting with its default, defined once (the CLI reads the
defaults from here)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelsmith.capture import FORWARDS

Mode = Literal["eager", "compile", "graphs"]

DEFAULT_BUDGET = "20m"


class OptimizeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    entry: str
    """`package.module:factory` or `path/to/file.py:factory`, returning (model, inputs), as for capture."""
    out: Path
    """The work directory: capture, seeds, runs, patch, optimize.json and report.html."""
    budget_s: float = Field(default=1200.0, ge=0)
    """Search time in seconds, split over the regions by their share of the forward (budget.py)."""
    top: int = Field(default=10, ge=1)
    """The heaviest regions outside library ops (GEMMs, attention, convolution, embedding) to search."""
    min_share: float = Field(default=0.0, ge=0.0, le=1.0)
    """Regions below this share of the forward are not captured as tasks."""
    forwards: int = Field(default=FORWARDS, ge=1)
    """Profiled forwards the capture ranks on."""
    shapes: list[dict[str, int]] = Field(default_factory=list)
    """The shapes to capture at (`--shape`): the factory's keyword arguments at each, the main first (timed);
    each task holds every shape its region holds at, and each kernel is judged at all of them."""
    fused: bool = False
    """Also capture and search the regions across the library boundary (a GEMM with its norm, epilogue or
    sibling GEMMs; attention with its rotary and KV-cache append: capture's `fused` tasks), ranked with the
    others. Off by default while there are no seeds of those kinds: each needs a start (--seeds, an LLM)."""
    modes: tuple[Mode, ...] | None = None
    """How the patch is checked: eager, compile (torch.compile), graphs (CUDA graphs); None: every mode the
    device runs (apply's modes_on). The patch serves only the modes checked."""
    device: Literal["cuda", "cpu"] = "cuda"
    seeds: str | None = None
    """A folder of seeds named as the tasks (NAME.py or NAME_seed.py), or `file.py:function`: a function
    that takes a task file's path and returns a seed's source, or None."""
    llm_base_url: str | None = None
    model: str | None = None
    """With an LLM (`model` at `llm_base_url`, or a config whose [llm] lists models) the evolutionary
    search; without one the launch-parameter tuner."""
    config: Path | None = None
    """An evolve config file (TOML or YAML) for every search: its llm, evaluation, archive settings."""
    iterations: int | None = Field(default=None, ge=0)
    """At most this many iterations per region (None: as many as its time allows)."""
    workers: int | None = Field(default=None, ge=1)
    """Evaluation workers (default: one per GPU; 1 on the CPU); that many regions search at once."""
    small: bool = False
    """Search each task at its CPU_SIZES (the check still runs the model at its own sizes)."""
    reps: int = Field(default=10, ge=2)
    """Forwards timed before and after, each, in the patch's check."""
    accept_slower: Literal["none", "eager", "all"] = "none"
    """Pass a patched forward slower than the original, named (as `apply --accept-slower`)."""
    min_speedup: float | None = Field(default=None, ge=0)
    """Kernels whose verdict speedup is below this are left out of the patch (None: 1, and 0 on the CPU,
    whose speeds are the Triton interpreter's)."""
    eval_backend: Literal["local", "ray", "service"] | None = None
    ray_address: str | None = None
    eval_url: str | None = None

    @property
    def checked_modes(self) -> tuple[Mode, ...]:
        """The modes the patch is checked in (and may serve): those named, else every mode the device runs."""
        from kernelsmith.apply.options import modes_on

        return self.modes or modes_on(self.device)

    def bound(self) -> dict:
        """The settings that make the capture: a work directory is bound to them."""
        return {
            "entry": self.entry,
            "device": self.device,
            "top": self.top,
            "min_share": self.min_share,
            "forwards": self.forwards,
            "small": self.small,
            **({"shapes": self.shapes} if self.shapes else {}),  # a work directory made before --shape has none
            **({"fused": True} if self.fused else {}),  # nor one made before --fused
        }


def default(name: str):
    """A field's default, for the CLI's flags."""
    return OptimizeOptions.model_fields[name].default
