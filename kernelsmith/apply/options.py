"""How `kernelsmith apply` writes and checks a patch: one definition of every default, read by the CLI,
`kernelsmith optimize` and the Python API (as EvalOptions is for the evaluator)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["eager", "compile", "graphs"]
MODES: tuple[Mode, ...] = ("eager", "compile", "graphs")


def modes_on(device: str) -> tuple[Mode, ...]:
    """The modes checked when none are named. On a GPU every mode, since speed-minded users compile and
    replay CUDA graphs, and a mode no check measured is served by no kernel; on the CPU eager alone (its
    times are the Triton interpreter's, relative only, and a compiled check costs minutes there)."""
    return MODES if device == "cuda" else ("eager",)


class ApplyOptions(BaseModel):
    """Options of `kernelsmith apply` (the CLI's flags of the same names). An unknown value (a mode, an
    --accept-slower word) is refused when the options are made, in one line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cuda", "cpu"] | None = Field(
        default=None, description="Where the check runs the model (None: the capture's device)."
    )
    check: bool = Field(
        default=True, description="Check the patch end to end on the captured model (--no-check: do not)."
    )
    reps: int = Field(default=10, ge=1, description="Forwards timed per measure, patched and not, alternating.")
    atol: float | None = Field(default=None, ge=0, description="The outputs' flat tolerance (None: the verdict's).")
    rtol: float | None = Field(
        default=None, ge=0, description="The outputs' flat relative tolerance (None: the verdict's)."
    )
    min_speedup: float | None = Field(
        default=None,
        ge=0,
        description="A run's best kernel is left out below this verdict speedup (None: 1, or 0 for a CPU "
        "capture, whose runs time Triton's interpreter); below it against torch.compile, compiled graphs "
        "keep Inductor's own code for its regions (the kernel serves eager mode only).",
    )
    accept_slower: Literal["none", "eager", "all"] = Field(
        default="none",
        description="A kernel whose taking makes a mode slower is left out of it (serving.py) unless accepted, "
        "kept as measured: `eager` accepts an eager-time slowdown only (a server that replays CUDA graphs), "
        "`all` any.",
    )
    modes: tuple[Mode, ...] | None = Field(
        default=None,
        min_length=1,
        description="How the model runs in the check: eager, compile (torch.compile), graphs (CUDA graphs). "
        "The patch serves only the modes checked (another runs the model as it was: nothing measured it). "
        "None: every mode the device runs (modes_on).",
    )

    def modes_for(self, device: str) -> tuple[Mode, ...]:
        """The modes checked on `device`: those named, else modes_on(device)."""
        return self.modes or modes_on(device)

    def min_speedup_for(self, capture_device: str) -> float:
        """The --min-speedup in force for a capture made on `capture_device`."""
        if self.min_speedup is not None:
            return self.min_speedup
        return 0.0 if capture_device == "cpu" else 1.0
