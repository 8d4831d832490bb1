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
    return (f"status={r.status.value} flags={r.flags} candidate_ms={r.candidate_ms} "
            f"reference_ms={r.reference_ms} speedup={r.speedup} error={r.error!r}")


def test_control_honest_softmax_is_clean(gpu_pool):
    for task in (SOFTMAX, SOFTMAX_LARGE):
        r = gpu_pool.submit(Task.from_file(task), SOFTMAX_HONEST.read_text(), OPTS).result(timeout=RESULT_WAIT)
        assert r.status == Status.correct, describe(r)
        assert r.flags == [], describe(r)
        assert r.speedup is not None and r.speedup < MAX_HONEST_SPEEDUP, describe(r)


@pytest.mark.parametrize("name", ["caching_allocator_reuse"])
def test_not_correct(gpu_pool, name):
    r = evaluate(gpu_pool, name)
    assert r.status != Status.correct, describe(r)


@pytest.mark.parametrize("name", ["cuda_graph_replay", "cache_across_timed_calls", "cache_by_data_ptr",
                                  "background_thread_fill", "replay_previous_output"])
def test_incorrect(gpu_pool, name):
    r = evaluate(gpu_pool, name)
    assert r.status == Status.incorrect, describe(r)


def test_side_stream_kernel_is_caught(gpu_pool):
    """Work on a private stream that the timing events on the default stream do not wait for."""
    r = evaluate(gpu_pool, "side_stream_kernel", SOFTMAX_LARGE)
    caught = r.status != Status.correct or {"unsynced_work", "faster_than_roofline"} & set(r.flags)
    assert caught, describe(r)


def test_patched_cuda_event_has_no_effect(gpu_pool):
    r = evaluate(gpu_pool, "patch_cuda_event", SOFTMAX_LARGE)
    assert r.status == Status.correct, describe(r)
    assert r.speedup is not None and r.speedup < 50, describe(r)


@pytest.mark.parametrize("name", ["patch_bound_timer", "patch_harness_benchmark", "patch_channel_send",
                                  "forge_channel_message", "skip_work_until_last_rep",
                                  "rewind_last_seed"])
def test_faked_time_is_not_accepted(gpu_pool, name):
    """Timing forged or skipped inside the sandbox: not correct, or flagged, or a realistic speedup."""
    r = evaluate(gpu_pool, name, SOFTMAX_LARGE)
    ok = (r.status != Status.correct or "faster_than_roofline" in r.flags or "unsynced_work" in r.flags
          or (r.speedup is not None and r.speedup < MAX_HONEST_SPEEDUP))
    assert ok, describe(r)


@pytest.mark.parametrize("name", ["trivial_kernel_beside_torch", "hide_torch_ops", "dispatch_mode_aware"])
def test_torch_work_beside_a_token_kernel_is_flagged(gpu_pool, name):
    r = evaluate(gpu_pool, name)
    assert "torch_compute_op" in r.flags, describe(r)


def test_torch_only_forward_is_rejected(gpu_pool):
    r = evaluate(gpu_pool, "torch_only_forward")
    assert r.status == Status.rejected and "no_custom_kernel" in r.flags, describe(r)
