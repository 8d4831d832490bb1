"""`kernelsmith apply`'s times: the forward's device time read as `capture` reads it, on the CPU through
a profiler whose events are a CUDA run's (FakeGpuProfile); what only a GPU shows: benchmarks/device_llama.sh."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from test_apply import HONEST, _patch, block  # noqa: F401  (block: the fixture)
from torch.autograd import DeviceType  # pyright: ignore[reportPrivateImportUsage]
from torch.profiler import ProfilerActivity

import kernelsmith.capture.e2e as e2e
import kernelsmith.capture.profile as capture_profile
from kernelsmith.capture.e2e import check
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.patch_runtime import install
from kernelsmith.capture.tape import record

KERNEL_US = 10.0  # each aten op that calls no other launches one kernel of this time
GAP_US = 1000.0  # host time between the first and the last kernel of a range, on top of its CPU time
_REAL_PROFILE = torch.profiler.profile


class FakeGpuProfile:
    """torch.profiler.profile as a CUDA run's events read, on the CPU: every aten op that calls no other
    runs one kernel of KERNEL_US; a range's event on the CPU carries the kernels under it (its
    device_time_total), and its mirror on the GPU timeline spans from its first kernel to its last, the
    host's gaps included (its CPU time + GAP_US), as kineto reports a record_function range."""

    def __init__(self, *args, **kwargs):
        self.real = _REAL_PROFILE(activities=[ProfilerActivity.CPU])

    def __enter__(self):
        self.real.__enter__()
        return self

    def __exit__(self, *exc):
        return self.real.__exit__(*exc)

    def events(self):
        real = list(self.real.events() or [])

        def kernels_us(e) -> float:
            own = KERNEL_US if e.name.startswith("aten::") and not e.cpu_children else 0.0
            return own + sum(kernels_us(c) for c in e.cpu_children)

        cpu = [
            SimpleNamespace(
                name=e.name,
                device_type=DeviceType.CPU,
                device_time_total=kernels_us(e),
                cpu_time_total=e.cpu_time_total,
            )
            for e in real
        ]
        ranges = [e for e in real if e.name.startswith("ks_")]
        mirrors = [
            SimpleNamespace(
                name=e.name, device_type=DeviceType.CUDA, device_time_total=e.cpu_time_total + GAP_US, cpu_time_total=0
            )
            for e in ranges
        ]
        return cpu + mirrors


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(capture_profile, "profile", FakeGpuProfile)
    monkeypatch.setattr(e2e, "profile", FakeGpuProfile, raising=False)  # where an older e2e profiled itself
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def test_apply_reads_the_forwards_device_time_as_capture_does(block, tmp_path, fake_gpu):  # noqa: F811
    """Issue 41: apply's "device time" of the Llama decode step was 5.40 ms where capture's was 0.648 ms:
    it read each forward's range from its mirror on the GPU timeline (the span, host gaps included).
    Both now read the kernels under the range; on the same events the original forward's time is capture's."""
    entry = call_entry(block[0], "cpu")
    with torch.no_grad():
        _, captured = record(entry.model, *copy.deepcopy((entry.args, entry.kwargs)), "cuda")
    assert captured.measure == "device time" and captured.total_us > 0
    done = check(entry, install(entry.model, _patch(block, tmp_path, HONEST)), "cuda", reps=3)
    assert [t.measure for t in done.timings] == ["device time", "eager time"]
    device = done.timings[0]
    assert device.before_ms.low == device.before_ms.median == device.before_ms.high
    assert device.before_ms.median == pytest.approx(captured.total_us / 1e3)
