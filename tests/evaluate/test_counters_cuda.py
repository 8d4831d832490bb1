"""The counters stage on a GPU (Nsight Compute): run on the H200 by benchmarks/device/eval.sh.

KernelBench level1 19_ReLU moves 2 x 4096 x 393216 fp32 values once: the DRAM bytes ncu counts
must match that within 5%, the profiled process must be contained, and the verdict's timing is
the same with profiling as without (the stage runs after it, between evaluations)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelsmith.evaluate import EvalOptions, EvalPool, Status
from kernelsmith.evaluate.counters import ncu_path
from kernelsmith.task import Task

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ROOT = Path(__file__).resolve().parents[2]
KB = ROOT / "benchmarks/kernelbench"
RELU_BYTES = 2 * 4096 * 393216 * 4


@pytest.fixture(scope="module")
def gpu_pool(tmp_path_factory):
    import os

    os.environ["KERNELSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cuda-cache"))
    with EvalPool(device="cuda", workers=1, options=EvalOptions(device="cuda", timeout=180, trials=2)) as pool:
        yield pool


@pytest.mark.skipif(ncu_path() is None, reason="needs Nsight Compute")
def test_relu_counters_match_the_bytes_it_must_move(gpu_pool):
    task = Task.from_file(KB / "problems/level1/19_ReLU.py")
    cand = (KB / "candidates/level1/19_ReLU.py").read_text()
    r = gpu_pool.evaluate(task, cand)
    assert r.status == Status.correct, r.error
    rep = gpu_pool.profile(task, cand, 180).result()
    assert rep.status == "ok", (rep.status, rep.message)
    k = rep.heaviest
    assert k is not None and "relu_kernel" in k.name and k.launches == 1
    moved = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
    assert moved == pytest.approx(RELU_BYTES, rel=0.05)
    assert k.dram_gbps == pytest.approx(RELU_BYTES / k.duration_ns, rel=0.05)
    assert rep.summary().split(": ", 1)[1].startswith("memory-bound")
    on = {name for name, v in rep.contained.items() if v.startswith("on")}
    assert {"network", "landlock", "seccomp"} <= on, rep.contained
    again = gpu_pool.evaluate(task, cand)  # the stage leaves nothing behind that slows the next verdict
    assert again.status == Status.correct and again.candidate_ms == pytest.approx(r.candidate_ms, rel=0.05)


@pytest.mark.skipif(ncu_path() is None, reason="needs Nsight Compute")
def test_a_failing_candidate_gets_a_failed_report_not_a_hang(gpu_pool):
    task = Task.from_file(KB / "problems/level1/19_ReLU.py")
    broken = "class ModelNew:\n    def __init__(self):\n        raise RuntimeError('no model today')\n"
    rep = gpu_pool.profile(task, broken, 120).result()
    assert rep.status == "failed" and "no model today" in (rep.message or ""), rep
