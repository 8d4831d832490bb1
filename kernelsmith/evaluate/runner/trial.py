"""The sandbox's correctness trial: forward twice on the judge's seed, each call's outputs sent to the judge.

Both calls run on the same input tensors (refilled in place with the seed's values before the second,
for a forward that writes its inputs), each recorded below Python (every call whose output counts is
watched). Before the first, the memory the allocator keeps free is filled with NaN; before the second,
the first call's outputs are too, in place, and let go (runner/poison.py). A kernel that writes only
part of its output and counts on the allocator handing back a block that still holds the right values
(its own earlier output on the same inputs) returns NaN in the second call; the judge checks both calls
within the tolerance, so results that vary in their last bits (atomics) stay correct.

A mixin of kernelsmith.evaluate.runner.sandbox.Sandbox, kept apart so that each file holds one concern.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kernelsmith.evaluate.measuring.activity import Activity, ActivityRecorder
from kernelsmith.evaluate.runner import poison
from kernelsmith.evaluate.runner.watch import new_threads
from kernelsmith.evaluate.runtime import at_sizes, make_inputs, refill_inputs, synchronize

if TYPE_CHECKING:
    from kernelsmith.evaluate.runner.watch import LaunchCounter

# Bound before any candidate code is imported: patching these names later changes nothing here.
_enumerate_threads = threading.enumerate
_perf_counter = time.perf_counter
_copy = torch.Tensor.copy_

# How long a CUDA trial holds the device while the host runs forward (stream order, activity.py):
# twice the host time of the previous trial's forward, within these bounds. The first trial's
# forward usually compiles, so it is checked without the guarantee (never with a false alarm).
HOLD_MS = (2.0, 50.0)


@dataclass
class Call:
    """One forward of a trial: its output, the copies sent, and what it ran."""

    out: Any
    structure: object
    leaves: list
    launches: int
    activity: Activity


class TrialMixin:
    """The trial's steps; the Sandbox's state they use is declared here."""

    device: str
    task: Any
    model: Any
    launches: LaunchCounter
    spin_cycles_per_ms: float
    hold_ms: float
    out_sizes: list[int]

    def forward(self, inputs: list):
        raise NotImplementedError

    def snapshot(self, out) -> tuple[object, list]:
        raise NotImplementedError

    def fail(self, stage: str, exc: BaseException, kind: str | None = None, what: str = "") -> None:
        raise NotImplementedError

    def send_outputs(self, op: str, leaves: list, inputs: list, **extra) -> bool:
        raise NotImplementedError

    def trial(self, seed: int, sizes: dict[str, int] | None = None) -> bool:
        """One correctness trial (see the module's docstring): "outputs" for the first call, and once the
        judge has acknowledged it, "repeat" for the second. `sizes`: the task's named sizes at another shape
        of its SHAPES, set in its module for the trial (as the judge sets them in its own)."""
        with at_sizes(self.task, sizes):
            return self._trial(seed)

    def _trial(self, seed: int) -> bool:
        try:
            inputs = make_inputs(self.task, seed, self.device)
            poison.fill_free_memory(self.device, self.out_sizes)
            synchronize(self.device)
            threads_before = set(_enumerate_threads())
            first = self._call(inputs, ordered=True)
            threads = new_threads(threads_before)
        except BaseException as exc:
            self.fail("trial", exc)
            return False
        sent = self.send_outputs(
            "outputs",
            first.leaves,
            inputs,
            structure=first.structure,
            launches=first.launches,
            threads=threads,
            activity=first.activity.to_message(),
        )
        if not sent:
            return False
        try:
            self.out_sizes = poison.fill_outputs(first.out, [*inputs, *self._state()])
            del first
            # The same tensors, their contents as made again: a forward that writes its inputs (as its
            # reference may) starts the second call from the same values.
            refill_inputs(self.task, inputs, seed, self.device, copy=_copy)
            poison.fill_free_memory(self.device, self.out_sizes)
            synchronize(self.device)
            second = self._call(inputs, ordered=False)
            threads = new_threads(threads_before)
        except BaseException as exc:
            self.fail("trial", exc, what="the second call on the same inputs raised")
            return False
        return self.send_outputs(
            "repeat",
            second.leaves,
            inputs,
            structure=second.structure,
            launches=second.launches,
            threads=threads,
            activity=second.activity.to_message(),
        )

    def _call(self, inputs: list, ordered: bool) -> Call:
        """forward once under the recorder; `ordered`: the window checks stream order (activity.py)."""
        before = self.launches.count
        hold = int(self.hold_ms * self.spin_cycles_per_ms) if ordered else 0
        with ActivityRecorder(self.device, hold) as rec:
            rec.hold()
            t0 = _perf_counter()
            out = self.forward(inputs)
            host_ms = (_perf_counter() - t0) * 1e3
            rec.release()
            synchronize(self.device)
        if ordered:
            self.hold_ms = min(max(2 * host_ms, HOLD_MS[0]), HOLD_MS[1])
        structure, leaves = self.snapshot(out)
        return Call(out, structure, leaves, self.launches.count - before, rec.activity)

    def _state(self) -> list[torch.Tensor]:
        """The model's parameters and buffers: storages an output may share, never overwritten."""
        if not isinstance(self.model, torch.nn.Module):
            return []
        return [*self.model.parameters(), *self.model.buffers()]
