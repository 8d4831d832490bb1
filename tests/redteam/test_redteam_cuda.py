"""Red team on a GPU: the cheats that only mean something with CUDA streams, graphs, the caching
allocator and CUDA-event timing, plus the timing forgeries of the CPU suite on a task large
enough that its time is bounded below by memory bandwidth.

Skipped without a GPU; run on the H200 with `pytest -m cuda tests/redteam`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelsmith.evaluate import EvalOptions, EvalPool, EvalResult, Status
from kernelsmith.task import Task

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
REPO = HERE.parents[1]
SOFTMAX = REPO / "examples/softmax/task.py"  # 64x512 fp32
SOFTMAX_HONEST = REPO / "examples/softmax/triton_softmax.py"
# 4096x8192 fp32: 256 MiB of traffic, ~60 us at the H200's bandwidth: a time far below that is
# impossible, and a cheat that skips the work shows.
SOFTMAX_LARGE = HERE / "tasks/softmax_large_task.py"
SIDE_STREAM_JOINED = REPO / "tests/cases/side_stream_joined.py"  # honest use of a side stream

OPTS = EvalOptions(device="cuda", timeout=120.0, trials=2, compile_baseline=False)
RESULT_WAIT = 600.0
# An honest Triton softmax is within a small factor of torch.softmax on these tasks; faked or
# skipped work claims 20x to 1e6x.
MAX_HONEST_SPEEDUP = 5.0


@pytest.fixture(scope="module")
def gpu_pool(tmp_path_factory):
    os.environ["KERNELSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("redteam-cuda-cache"))
    with EvalPool(device="cuda", workers=1, options=OPTS) as pool:
        yield pool


def evaluate(pool, candidate: str, task: Path = SOFTMAX) -> EvalResult:
    source = (CANDIDATES / f"{candidate}.py").read_text()
    return pool.submit(Task.from_file(task), source, OPTS).result(timeout=RESULT_WAIT)


def describe(r: EvalResult) -> str:
    return (
        f"status={r.status.value} flags={r.flags} candidate_ms={r.candidate_ms} "
        f"reference_ms={r.reference_ms} speedup={r.speedup} error={r.error!r}"
    )


def test_control_honest_softmax_is_clean(gpu_pool):
    for task in (SOFTMAX, SOFTMAX_LARGE):
        r = gpu_pool.submit(Task.from_file(task), SOFTMAX_HONEST.read_text(), OPTS).result(timeout=RESULT_WAIT)
        assert r.status == Status.correct, describe(r)
        assert r.flags == [], describe(r)
        assert r.success, describe(r)
        assert r.speedup is not None and r.speedup < MAX_HONEST_SPEEDUP, describe(r)


@pytest.mark.parametrize("name", ["caching_allocator_reuse"])
def test_not_correct(gpu_pool, name):
    r = evaluate(gpu_pool, name)
    assert r.status != Status.correct, describe(r)


@pytest.mark.parametrize(
    "name",
    [
        "cuda_graph_replay",
        "cache_across_timed_calls",
        "cache_by_data_ptr",
        "background_thread_fill",
        "replay_previous_output",
    ],
)
def test_incorrect(gpu_pool, name):
    """Outputs served from a cache or written late: incorrect. Under graph timing a cache keyed on the
    input object can serve a captured call whose set recurs (call k + sets) with that set's own right
    output; the graph then holds fewer of its kernels than calls, which the launch count flags."""
    r = evaluate(gpu_pool, name)
    assert not r.success, describe(r)
    assert r.status == Status.incorrect or "no_custom_kernel" in r.flags, describe(r)


@pytest.mark.parametrize("task", [SOFTMAX, SOFTMAX_LARGE], ids=["small", "large"])
def test_side_stream_kernel_is_caught(gpu_pool, task):
    """Work on a private stream that the caller's stream never waits for: flagged from the device's
    own timestamps at any size (a ~5 us kernel and a large one). Its time includes the side work (a
    device-wide synchronize ends every timed call); run to run, the same kernel's time varies too
    much on the H200 (0.09 to 0.14 ms) to compare it with the honest kernel's here."""
    r = evaluate(gpu_pool, "side_stream_kernel", task)
    assert "unsynced_work" in r.flags and not r.success, describe(r)


@pytest.mark.parametrize("task", [SOFTMAX, SOFTMAX_LARGE], ids=["small", "large"])
def test_side_stream_joined_back_is_honest(gpu_pool, task):
    """The same kernel on a side stream that waits for its inputs and is joined back by an event
    before forward returns: correct stream use, a success."""
    r = gpu_pool.submit(Task.from_file(task), SIDE_STREAM_JOINED.read_text(), OPTS).result(timeout=RESULT_WAIT)
    assert r.success, describe(r)


def test_patched_cuda_event_has_no_effect(gpu_pool):
    r = evaluate(gpu_pool, "patch_cuda_event", SOFTMAX_LARGE)
    assert r.success, describe(r)
    assert r.speedup is not None and r.speedup < 50, describe(r)


@pytest.mark.parametrize(
    "name",
    [
        "patch_bound_timer",
        "patch_harness_benchmark",
        "patch_channel_send",
        "forge_channel_message",
        "skip_work_until_last_rep",
        "rewind_last_seed",
    ],
)
@pytest.mark.parametrize("task", [SOFTMAX_LARGE, SOFTMAX], ids=["large", "2us"])
def test_faked_time_is_not_accepted(gpu_pool, name, task):
    """Timing forged or skipped inside the sandbox: never a success, at ~60 us and at ~2 us a call.
    The judge's clock over CUDA-graph replays bounds the sandbox's time at both sizes."""
    r = evaluate(gpu_pool, name, task)
    assert not r.success, describe(r)
    assert r.status != Status.correct or {"timing_mismatch", "faster_than_roofline", "no_custom_kernel"} & set(
        r.flags
    ), describe(r)


@pytest.mark.parametrize("name", ["trivial_kernel_beside_torch", "hide_torch_ops"])
def test_torch_work_beside_a_token_kernel_is_flagged(gpu_pool, name):
    """Decided from the kernels that ran on the device (CUPTI), which no Python mode hides."""
    r = evaluate(gpu_pool, name)
    assert "torch_compute_op" in r.flags and not r.success, describe(r)
    assert r.activity_source == "device", describe(r)


def test_behaving_only_while_watched_never_runs_the_torch_path(gpu_pool):
    """Every call whose output or time counts is recorded, so its torch path never runs: a success
    is allowed only with no library softmax kernel among what ran."""
    r = evaluate(gpu_pool, "dispatch_mode_aware")
    library = [k.name for k in r.kernels if not k.own]
    assert "torch_compute_op" in r.flags or not any("softmax" in k for k in library), describe(r)


def test_partial_replacement_is_a_success(gpu_pool):
    """KernelBench's rule: the library conv kept, ReLU + bias fused into one Triton kernel."""
    task = REPO / "tests/cases/conv_relu_bias_task.py"
    honest = gpu_pool.submit(
        Task.from_file(task), (REPO / "tests/cases/conv_relu_bias_partial.py").read_text(), OPTS
    ).result(timeout=RESULT_WAIT)
    token = gpu_pool.submit(
        Task.from_file(task), (REPO / "tests/cases/conv_relu_bias_token.py").read_text(), OPTS
    ).result(timeout=RESULT_WAIT)
    assert honest.success, describe(honest)
    assert any(k.own for k in honest.kernels) and any(not k.own for k in honest.kernels), honest.kernels
    assert "torch_compute_op" in token.flags and not token.success, describe(token)


def test_torch_only_forward_is_rejected(gpu_pool):  # noqa: D103
    r = evaluate(gpu_pool, "torch_only_forward")
    assert r.status == Status.rejected and "no_custom_kernel" in r.flags, describe(r)


@pytest.mark.parametrize("name", ["stale_memory_on_repeat", "stale_buffer_on_repeat"])
def test_an_output_left_to_stale_memory_is_incorrect(gpu_pool, name):
    """Half the output written, the other half left to a block that still holds the right values from an
    earlier call on the same inputs: the trial's second call, after the first call's output and the
    allocator's free blocks were filled with NaN, is wrong (issue 47)."""
    r = evaluate(gpu_pool, name)
    assert r.status == Status.incorrect and "second call on the same inputs" in (r.error or ""), describe(r)


def test_last_bits_that_vary_from_call_to_call_stay_correct(gpu_pool):
    """The trial's two calls are each held to the tolerance, not to each other's bits (atomics)."""
    source = (REPO / "tests/cases/softmax_last_bits_vary.py").read_text()
    r = gpu_pool.submit(Task.from_file(SOFTMAX), source, OPTS).result(timeout=RESULT_WAIT)
    assert r.success, describe(r)


# Two evaluations of one 2-us kernel in CUDA graphs agree within a few percent on the H200 (docs/benchmarks.md).
L2_NOISE = 1.15


def test_inputs_marked_persisting_in_the_l2_buy_no_time(gpu_pool):
    """pygpubench PR 49: the candidate sets a persisting access policy window over its input sets, so that
    they would survive the L2 flush; the harness resets persisting lines and sets the set-aside to 0 before
    every timed call and replay, so its time is the honest kernel's, within noise (issue 47)."""
    honest = gpu_pool.submit(Task.from_file(SOFTMAX), SOFTMAX_HONEST.read_text(), OPTS).result(timeout=RESULT_WAIT)
    cheat = evaluate(gpu_pool, "l2_persisting_window")
    assert cheat.success, describe(cheat)
    assert cheat.timing_method == honest.timing_method == "cuda_graph", (describe(cheat), cheat.timing_fallback)
    assert cheat.candidate_ms and honest.candidate_ms
    assert cheat.candidate_ms * L2_NOISE >= honest.candidate_ms, (describe(cheat), describe(honest))
