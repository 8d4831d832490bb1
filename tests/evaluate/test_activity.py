"""The operator rule and the judge's clock as pure functions, on kernel names and counts as the
H200 reports them (benchmarks/results/archive/probe_activity_h200_2026-12-03.log)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from kernelsmith.evaluate.measuring import judge_clock
from kernelsmith.evaluate.measuring.activity import (
    Activity,
    ActivityRecorder,
    KernelSpan,
    base_name,
    judge_operators,
    stream_order,
)

REPO = Path(__file__).resolve().parents[2]

SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*, float const*, int, int, int, bool const*, int)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
CONV = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, 2ul>)"


SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"
CALLER, SIDE = 7, 13


def _window(*kernels: tuple[str, int, int, int]) -> list[KernelSpan]:
    """A stream-order window (times in us): the hold spin 0..2000 and the closing spin at 2001 on
    the caller's stream, plus the given kernels."""
    spans = [KernelSpan(SPIN, CALLER, 0, 2_000_000), KernelSpan(SPIN, CALLER, 2_001_000, 2_002_000)]
    return spans + [KernelSpan(n, stream, a * 1000, b * 1000) for n, stream, a, b in kernels]


@pytest.mark.parametrize(
    "kernels,late,early",
    [
        ([("softmax", CALLER, 2000, 2001)], {}, {}),  # on the caller's stream
        ([("softmax", SIDE, 2000, 2001)], {}, {}),  # on a side stream, joined back before forward returned
        ([("softmax", SIDE, 2001, 2006)], {"softmax": 1}, {}),  # still running after forward returned, unawaited
        ([("softmax", SIDE, 500, 505)], {}, {"softmax": 1}),  # ran during the caller's earlier work
        ([("k", CALLER, 2000, 2001), ("k", SIDE, 100, 2500)], {"k": 1}, {}),
        ([(SPIN, SIDE, 2001, 2100)], {SPIN: 1}, {}),  # a candidate's own spin is judged like any kernel
    ],
)
def test_stream_order(kernels, late, early):
    result = stream_order(_window(*kernels))
    assert result is not None
    got_late, got_early, ours = result
    assert dict(got_late) == late and dict(got_early) == early
    assert {k.start_ns for k in ours} == {0, 2_001_000}


def test_stream_order_needs_both_spins():
    assert stream_order([KernelSpan(SPIN, CALLER, 0, 10), KernelSpan("k", SIDE, 20, 30)]) is None
    assert stream_order([KernelSpan(SPIN, CALLER, 0, 10), KernelSpan(SPIN, SIDE, 20, 30)]) is None


def test_stream_order_survives_the_message():
    act = Activity(late=Counter({"k": 2}), early=Counter({"j": 1}), ordered_windows=1)
    back = Activity.from_message(act.to_message())
    assert back.late == act.late and back.early == act.early and back.ordered_windows == 1


def test_base_names():
    assert base_name(SOFTMAX) == "softmax_warp_forward"
    assert base_name(FILL) == "vectorized_elementwise_kernel"
    assert base_name("add_one_kernel") == "add_one_kernel"
    assert base_name("void my_kernel<float>(float*, int)") == "my_kernel"


def _device(**kernels) -> Activity:
    return Activity(kernels=Counter(kernels))


REF = Activity(kernels=Counter({CONV: 1, RELU: 1, "add_bias": 1}))


@pytest.mark.parametrize(
    "cand,policy,flag",
    [
        ({CONV: 1, "fused_relu_bias": 1}, "partial", None),  # the library conv kept: KernelBench's rule
        ({CONV: 1, "fused_relu_bias": 1}, "none", "torch_compute_op"),
        ({CONV: 1, RELU: 1, "add_bias": 1, "copy_kernel": 1}, "partial", "torch_compute_op"),  # a token kernel
        ({CONV: 1, RELU: 1, "add_bias": 1}, "partial", "no_custom_kernel"),
        ({FILL: 1, "fused_all": 1}, "none", None),  # fills are glue
    ],
)
def test_operator_rule_on_device_kernels(cand, policy, flag):
    v = judge_operators(Activity(kernels=Counter(cand)), REF, {"fused_relu_bias", "copy_kernel", "fused_all"}, policy)
    assert v.flag == flag, v


def test_a_kernel_the_reference_launches_is_never_own():
    """Naming a Triton function after the library kernel does not make the library's kernel own."""
    ref = Activity(kernels=Counter({SOFTMAX: 1}))
    v = judge_operators(Activity(kernels=Counter({SOFTMAX: 1})), ref, {"softmax_warp_forward"}, "partial")
    assert v.flag == "no_custom_kernel"


def test_cpu_rule_on_aten_ops():
    ref = Activity(ops=Counter({"softmax": 1, "_softmax": 1}))
    cheat = judge_operators(
        Activity(ops=Counter({"softmax": 1, "_softmax": 1, "empty_like": 1})), ref, set(), "partial", python_launches=1
    )
    honest = judge_operators(Activity(ops=Counter({"empty_like": 1})), ref, set(), "partial", python_launches=1)
    assert cheat.flag == "torch_compute_op" and honest.flag is None


def test_recorder_sees_ops_python_modes_cannot_hide():
    from torch.utils._python_dispatch import _disable_current_modes

    x = torch.rand(8, 8)
    with ActivityRecorder("cpu") as rec:
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            torch.softmax(x, dim=-1)
    assert rec.activity.ops["softmax"] == 1 and not rec.activity.tampered


def test_a_stopped_recorder_is_tampered():
    with ActivityRecorder("cpu") as rec:
        torch.autograd.profiler._disable_profiler()
    assert rec.activity.tampered
    assert not torch.autograd.profiler._is_profiler_enabled  # the next window starts clean


def test_a_recorder_stopped_and_restarted_by_someone_else_is_tampered():
    """The window ends a session that has everything since the restart, but not the marker."""
    x = torch.rand(8, 8)
    with ActivityRecorder("cpu") as rec:
        torch.autograd.profiler._disable_profiler()
        torch.autograd.profiler.profile(use_kineto=True).__enter__()
        torch.softmax(x, dim=-1)
    assert rec.activity.tampered and not torch.autograd._profiler_enabled()
    with ActivityRecorder("cpu") as rec:
        torch.softmax(x, dim=-1)
    assert rec.activity.ops["softmax"] == 1 and not rec.activity.tampered


def test_the_first_window_does_not_import_inductor():
    """torch.profiler.profile's first use imports torch._inductor (about 1 s of every sandbox's
    start on the CPU machine, docs/benchmarks.md); the recorder's session must not."""
    code = (
        "import sys, torch, triton\n"
        "from kernelsmith.evaluate.measuring.activity import ActivityRecorder\n"
        "with ActivityRecorder('cpu') as rec:\n"
        "    torch.ones(2).add_(1)\n"
        "assert rec.activity.ops['add_'] == 1 and not rec.activity.tampered, rec.activity\n"
        "print('torch._inductor' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize(
    "device,sandbox_ms,wall_ms,calls,overhead,mismatch",
    [
        ("cuda", 3.1, 33 * (3.4 + 8.5), 33, 8.5, False),  # an honest 3 ms call (H200 numbers)
        ("cuda", 1e-6, 33 * (3.4 + 8.5), 33, 8.5, True),  # the same call, its time forged
        ("cuda", 1.6, 33 * (3.4 + 8.5), 33, 8.5, False),  # a 2x lie is within the margin
        ("cuda", 0.1, 50 * (0.44 + 0.7), 50, 0.7, False),  # a host-bound 0.1 ms call: left to the roofline flag
        ("cuda", 0.092, 56.43, 50, 0.359, False),  # side stream joined back: the judge's clock 8x the events'
        ("cpu", 140.0, 2 * 230.0, 2, 2.0, False),
        ("cpu", 7.1, 6 * (19.8 + 1.3), 6, 1.3, False),  # 2.8x under a parallel test run: noise
        ("cpu", 1e-6, 6 * 170.0, 6, 8.0, True),
        ("cpu", 0.3775, 6 * (11.79 + 0.5), 6, 0.5, False),  # a native C++ call on two busy cores: the scheduler
        ("cpu", 1e-6, 6 * (60.0 + 0.5), 6, 0.5, True),  # a forged time of a 60 ms call is still caught
    ],
)
def test_judge_clock(device, sandbox_ms, wall_ms, calls, overhead, mismatch):
    v = judge_clock.judge(device, "eager", sandbox_ms, wall_ms, calls, overhead)
    assert v.mismatch is mismatch, v
    assert v.per_call_ms == pytest.approx(wall_ms / calls - overhead)


@pytest.mark.parametrize(
    "sandbox_ms,wall_ms,calls,overhead,mismatch",
    [
        # A 2 us call, 4096 in the batch (8.2 ms), harness 3 ms, 0.3 ms of request and reply.
        (0.002, 8.2 + 3.0 + 0.3, 4096, 3.0, False),
        (0.0005, 8.2 + 3.0 + 0.3, 4096, 3.0, True),  # its time forged 4x down
        (0.0015, 8.2 + 3.0 + 0.3, 4096, 3.0, False),  # within the margin
        (0.002, 8.2 + 3.0 + 2.0, 4096, 3.0, False),  # a 2 ms host hiccup between go and the reply
        (0.002, 6.0 + 3.0 + 0.3, 4096, 3.0, False),  # the warm calls of the batch faster than the cold ones
        (0.05, 400 * 0.05 + 1.0, 400, 0.8, False),  # a 50 us call
        (0.02, 400 * 0.05 + 1.0, 400, 0.8, True),  # 2.5x down
    ],
)
def test_judge_clock_over_graph_replays(sandbox_ms, wall_ms, calls, overhead, mismatch):
    v = judge_clock.judge("cuda", "graph", sandbox_ms, wall_ms, calls, overhead)
    assert v.mismatch is mismatch, v
    assert v.per_call_ms == pytest.approx((wall_ms - overhead) / calls)


@pytest.mark.parametrize(
    "sandbox_ms,wall_ms,overhead,high,mismatch",
    [
        # The H100's honest 2.11-us softmax that was flagged (gate-pytest, 2026-12-07): its batch was 16.3 ms
        # above the one harness measurement; the harness of 4096 calls measured 30-46 ms between evaluations.
        (0.00211, 39.5 + 16.3, 39.5, None, True),  # one measurement: flagged, as on the H100
        (0.00211, 39.5 + 16.3, 39.5, 46.2, False),  # the harness's own spread in the same run: not flagged
        (0.00211, 38.8, 39.7, 41.0, False),  # the batch below the harness: the clock bounds nothing
        (1e-6, 39.5 + 8.7, 39.5, 41.0, True),  # a forged time is still below any positive bound
        (0.0005, 30.0 + 8.7, 30.0, 30.5, True),  # a 4x lie with a steady harness is caught
        (0.0015, 30.0 + 8.7, 30.0, 30.5, False),  # within the margin
    ],
)
def test_judge_clock_gives_the_candidate_the_harness_spread(sandbox_ms, wall_ms, overhead, high, mismatch):
    v = judge_clock.judge("cuda", "graph", sandbox_ms, wall_ms, 4096, overhead, high)
    assert v.mismatch is mismatch, v
    assert v.per_call_ms == pytest.approx(max((wall_ms - overhead) / 4096, 0.0))
    assert v.bound_ms >= 0.0


def test_graph_batch_sizes():
    assert judge_clock.graph_batch_calls(0.002) == 4096  # 2 us: capped
    assert judge_clock.graph_batch_calls(0.1) == 200
    assert judge_clock.graph_batch_calls(50.0) == 8
    assert judge_clock.graph_batch_sets(4096, 2**20) == 16
    assert judge_clock.graph_batch_sets(8, 2**20) == 8
    assert judge_clock.graph_batch_sets(200, 2**31) == 1  # memory-bound: one set, refilled each go
