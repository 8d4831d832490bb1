"""Where the forward's time goes, op by op, and what the forward itself costs.

The ranking comes from several profiled forwards (torch.profiler, a record_function range around each
op, opened by a dispatch mode that numbers the ops as the tape does): per op, on CUDA the device time
of the kernels launched under its range, on the CPU the range's CPU time; the forward's total is, on
CUDA, every kernel the profile of the one forward holds (read_times), on the CPU the same measure over
one range around the whole forward (on the CPU, less the mode's own bookkeeping), and
on the CPU the forward profiled once more without the per-op ranges (`forward_us`: the time apply's
profile of a forward reads).
One profiled forward is a noisy sample (a busy machine moves ranks), so capture keeps every forward's
times and ranks on each op's least time over them (run.py's _timed_groups: a busy machine only adds
time). The profiler also slows a forward several-fold on the CPU, so the forward's own time is measured
apart, without it: wall time per forward (synchronised on CUDA).
"""

from __future__ import annotations

import difflib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType  # pyright: ignore[reportPrivateImportUsage]
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsmith.errors import UserError

FORWARD = "ks_capture_forward"
_OP = "ks_op_"


@dataclass
class OpTimes:
    """One profiled forward."""

    per_op_us: list[float]  # by tape index
    total_us: float  # the forward under the per-op ranges (the shares' whole)
    measure: str  # "device time" (CUDA) or "CPU time"
    # The forward's own profiled time, no range per op (on the CPU the ranges cost host time of their own,
    # which apply's profile of a forward does not pay; on CUDA the device time is total_us)
    forward_us: float | None = None


@dataclass
class Spread:
    """A median and the spread around it that one sample cannot stretch: `low`-`high` leave out the lowest
    and highest quarter of the samples (at least one each, from 3 samples on: with 3, the median alone).
    A min-max spread let one outlier of 10 forwards (a busy machine's 336 ms beside 6.8 ms) call a 107x
    slowdown "within noise" (issue 55)."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        ordered = sorted(values)
        cut = max(1, len(ordered) // 4) if len(ordered) >= 3 else 0
        kept = ordered[cut : len(ordered) - cut]
        return cls(statistics.median(ordered), kept[0], kept[-1])


def op_range(index: int):
    return record_function(f"{_OP}{index}")


@contextmanager
def profiling(device: str) -> Iterator[profile]:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with warnings.catch_warnings():
        # torch 2.11's profiler warns at its first cycle that it clears events at the end of each (2.13 from
        # the second): a profile here is one cycle, and the warning would be a user's second line of output
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
        with profile(activities=activities) as prof, record_function(FORWARD):
            yield prof
            if device == "cuda":
                torch.cuda.synchronize()


def read_times(prof: profile, n_ops: int, device: str, overhead_us: float) -> OpTimes:
    """One profiled forward's times: each numbered range's and the whole forward's. On CUDA the
    forward's device time is every kernel, copy and fill the profile holds (the profile holds the one
    forward), not the device time the profiler links to the forward's range: a kernel launched outside
    any torch op (a Triton kernel called from a patch's Python) may be linked to no range (on an H100 a
    patch's ranges read 0.0 ms for its Triton kernels, 2026-12-06), and would vanish from the total."""
    per_op = [0.0] * n_ops
    total = 0.0
    events = list(prof.events() or [])
    if device == "cuda":
        # A range's mirror on the GPU timeline spans gaps, not work: flagged as an annotation, or known by
        # our ranges' names. Not by the names of other CPU ranges: Inductor names the range around a
        # Triton launch after the kernel itself.
        launched = sum(
            e.device_time_total
            for e in events
            if e.device_type != DeviceType.CPU
            and not getattr(e, "is_user_annotation", False)
            and e.name != FORWARD
            and not e.name.startswith(_OP)
        )
    for e in events:
        if e.device_type != DeviceType.CPU:  # the kernels (counted above) and the ranges' mirrors
            continue
        t = e.device_time_total if device == "cuda" else e.cpu_time_total
        if e.name == FORWARD:
            total = t if device == "cuda" else max(t - overhead_us, sum(per_op))
        elif e.name.startswith(_OP):
            index = int(e.name.removeprefix(_OP))
            if index < n_ops:
                per_op[index] = t
    if device != "cuda":
        total = max(total, sum(per_op))
    else:
        total = max(total, launched)
    return OpTimes(per_op, total, "device time" if device == "cuda" else "CPU time")


class _Numbered(TorchDispatchMode):
    """Each op in a range of its own, numbered in the order the tape numbers them."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self.overhead_s = 0.0  # the mode's own time, outside the ops' ranges

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        began = time.perf_counter()
        self.names.append(str(func))
        self.overhead_s += time.perf_counter() - began
        with op_range(len(self.names) - 1):
            return func(*args, **(kwargs or {}))


def _to_tape(times: OpTimes, ran: list[str], ops: list[str]) -> OpTimes:
    """A forward's times by the tape's op numbers. A forward may run an op the record did not (a
    `detach` the recorder's bookkeeping costs HF's position ids) or miss one: the two sequences are
    aligned by op name, and an op of either that the other lacks has no time of its own here."""
    if ran == ops:
        return times
    per_op = [0.0] * len(ops)
    matched = 0
    for block in difflib.SequenceMatcher(None, ops, ran, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            per_op[block.a + k] = times.per_op_us[block.b + k]
        matched += block.size
    if len(ops) - matched > max(2, 0.1 * len(ops)):  # a detach or two of bookkeeping (HF's position ids)
        raise UserError(
            f"the model ran {len(ran)} ops in one forward and {len(ops)} in another on the same inputs, "
            f"{len(ops) - matched} of them others: capture ranks a forward whose ops do not change between runs"
        )
    return OpTimes(per_op, times.total_us, times.measure, times.forward_us)


def profiled_forwards(
    model: torch.nn.Module, fresh: Callable[[], tuple], device: str, ops: list[str], forwards: int
) -> list[OpTimes]:
    """`forwards` profiled forwards, each op's time under the tape's number for it (`ops`: the tape's
    op names in order)."""
    samples = []
    for _ in range(forwards):
        args, kwargs = fresh()
        mode = _Numbered()
        with torch.no_grad(), profiling(device) as prof, mode:
            model(*args, **kwargs)
        times = read_times(prof, len(mode.names), device, mode.overhead_s * 1e6)
        times.forward_us = times.total_us if device == "cuda" else _plain_profiled_us(model, fresh)
        samples.append(_to_tape(times, mode.names, ops))
    return samples


def _plain_profiled_us(model: torch.nn.Module, fresh: Callable[[], tuple]) -> float:
    """One forward's CPU time under the profiler with no range per op: what apply's profile of a forward
    reads (forward_time.profiled_ms), so that the two measure one thing."""
    args, kwargs = fresh()
    with torch.no_grad(), profiling("cpu") as prof:
        model(*args, **kwargs)
    return next((e.cpu_time_total for e in prof.events() or [] if e.name == FORWARD), 0.0)


def wall_times_ms(model: torch.nn.Module, fresh: Callable[[], tuple], device: str, forwards: int) -> Spread:
    """The forward's own time, without the profiler: wall milliseconds per forward."""
    times = []
    for _ in range(forwards):
        args, kwargs = fresh()
        with torch.no_grad():
            if device == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            model(*args, **kwargs)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - began) * 1e3)
    return Spread.of(times)
