"""Probe (H200): what torch.profiler's device activity shows for Triton, aten and cuDNN kernels,
what a device-wide synchronize before the end event costs, and what the profiler costs a timing.

    python3 benchmarks/probes/activity.py            # prints one JSON object per finding
"""

import json
import statistics
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.profiler import ProfilerActivity, profile


@triton.jit
def add_one_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def add_one(x):
    y = torch.empty_like(x)
    add_one_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def show(name, obj):
    print(json.dumps({name: obj}, default=str), flush=True)


def events_of(fn):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    evs = prof.profiler.kineto_results.events()
    rows = []
    for e in evs:
        rows.append([str(e.device_type()), e.name()[:140], e.correlation_id(), e.start_ns(), e.duration_ns()])
    return rows


x = torch.rand(64, 512, device="cuda")
img = torch.rand(8, 16, 32, 32, device="cuda")
w = torch.rand(32, 16, 3, 3, device="cuda")
b = torch.rand(32, 1, 1, device="cuda")
lin = torch.nn.Linear(512, 256).cuda()
add_one(x)
torch.cuda.synchronize()


def mixed():
    add_one(x)
    torch.softmax(x, dim=-1)
    y = F.conv2d(img, w)
    torch.relu(y) + b
    lin(x)
    torch.zeros(10, device="cuda")
    x.t().contiguous()


show("events", events_of(mixed))

from torch.utils._python_dispatch import _disable_current_modes  # noqa: E402 (after the probe's own setup)


def hidden():
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        torch.softmax(x, dim=-1)


show("hidden_ops", [r for r in events_of(hidden) if "softmax" in r[1].lower()])
show("profiler_state_inside", None)
with profile(activities=[ProfilerActivity.CUDA]) as p:
    show("enabled_inside", [torch.autograd.profiler._is_profiler_enabled, torch._C._autograd._profiler_enabled()])


# sync latency and side-stream gap
def gaps(fn, reps=50):
    out = []
    for _ in range(reps):
        s, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda.synchronize()
        s.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        e2.record()
        torch.cuda.synchronize()
        out.append((s.elapsed_time(e1), s.elapsed_time(e2), e1.elapsed_time(e2)))
    return {k: statistics.median(v[i] for v in out) for i, k in enumerate(("stream_ms", "device_ms", "gap_ms"))}


side = torch.cuda.Stream()
big = torch.rand(4096, 8192, device="cuda")


def on_side(t):
    def fn():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.softmax(t, dim=-1)

    return fn


for label, fn in [
    ("empty", lambda: None),
    ("small_softmax", lambda: torch.softmax(x, -1)),
    ("side_small", on_side(x)),
    ("large_softmax", lambda: torch.softmax(big, -1)),
    ("side_large", on_side(big)),
]:
    fn()
    torch.cuda.synchronize()
    show("gap_" + label, gaps(fn))


# profiler overhead on event timing
def timed(fn, reps=200):
    xs = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        torch.cuda.synchronize()
        e.record()
        torch.cuda.synchronize()
        xs.append(s.elapsed_time(e))
    return statistics.median(xs)


for label, fn in [
    ("small_add_one", lambda: add_one(x)),
    ("small_softmax", lambda: torch.softmax(x, -1)),
    ("large_softmax", lambda: torch.softmax(big, -1)),
]:
    plain = timed(fn)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        prof_t = timed(fn)
    plain2 = timed(fn)
    show("overhead_" + label, {"plain_ms": plain, "profiled_ms": prof_t, "plain_again_ms": plain2})
t0 = time.perf_counter()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(2000):
        add_one(x)
    torch.cuda.synchronize()
t1 = time.perf_counter()
n = len(p.profiler.kineto_results.events())
show("stop_cost", {"events": n, "run_and_stop_s": time.perf_counter() - t0, "run_s": t1 - t0})
