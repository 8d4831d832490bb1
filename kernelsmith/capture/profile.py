"""Where the forward's time goes, op by op: torch.profiler with a record_function range around each
op of the recorded forward (tape.record opens them).

On CUDA an op's time is the device time of the kernels launched under its range; on the CPU it is the
range's CPU time. The forward's total is the same measure over one range around the whole forward; on
the CPU, less the recorder's own bookkeeping between ops (it does no work of the model's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType  # pyright: ignore[reportPrivateImportUsage]
from torch.profiler import ProfilerActivity, profile, record_function

FORWARD = "ks_capture_forward"
_OP = "ks_op_"


@dataclass
class OpTimes:
    per_op_us: list[float]  # by tape index
    total_us: float
    measure: str  # "device time" (CUDA) or "CPU time"


def op_range(index: int):
    return record_function(f"{_OP}{index}")


@contextmanager
def profiling(device: str) -> Iterator[profile]:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof, record_function(FORWARD):
        yield prof
        if device == "cuda":
            torch.cuda.synchronize()


def read_times(prof: profile, n_ops: int, device: str, overhead_us: float) -> OpTimes:
    per_op = [0.0] * n_ops
    total = 0.0
    for e in prof.events() or []:
        if e.device_type != DeviceType.CPU:  # the ranges' mirrors on the GPU timeline
            continue
        t = e.device_time_total if device == "cuda" else e.cpu_time_total
        if e.name == FORWARD:
            total = t if device == "cuda" else max(t - overhead_us, sum(per_op))
        elif e.name.startswith(_OP):
            per_op[int(e.name.removeprefix(_OP))] = t
    if device != "cuda":
        total = max(total, sum(per_op))
    return OpTimes(per_op, total, "device time" if device == "cuda" else "CPU time")
