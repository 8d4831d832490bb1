"""Seeds made from recorded Inductor output, judged by the evaluator on the CPU (Triton interpreter),
and `kernelsmith seed`'s one-line errors. The transformation itself: tests/unit/test_seed_transform.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CASES, REPO

from kernelsmith.evaluate import Status
from kernelsmith.seed.assemble import candidate_source
from kernelsmith.seed.record import InductorRecord
from kernelsmith.task import Task

SEED_CASES = CASES / "seed"
RESULT_WAIT = 600.0


def ks(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelsmith", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def one_line_error(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr


# Every fixture with a Triton kernel: the GEMM and the convolution keep their library call
# (torch.mm, torch.convolution) beside Inductor's fused epilogue; three are reductions.
@pytest.mark.parametrize("name", ["gemm_mul_leakyrelu", "conv_relu_bias", "softmax", "layernorm", "rowsum_long"])
def test_a_seed_from_recorded_inductor_output_is_a_success(cpu_pool, name):
    task = Task.from_file(SEED_CASES / name / "task.py", name=name)
    source = candidate_source(InductorRecord.load(SEED_CASES / name), task)
    result = cpu_pool.submit(task, source).result(timeout=RESULT_WAIT)
    assert result.status is Status.correct and result.success, (result.status, result.flags, result.error)
    assert result.flags == []


def test_seed_without_a_gpu_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: seed would run")
    one_line_error(ks("seed", SEED_CASES / "softmax" / "task.py"), "needs a CUDA GPU")


def test_seed_of_a_file_that_is_not_a_task_says_so_in_one_line(tmp_path):
    one_line_error(ks("seed", CASES / "not_a_task.py"), "is not a task")
    one_line_error(ks("seed", tmp_path / "missing.py"), "not found")
    one_line_error(ks("seed", SEED_CASES / "softmax" / "task.py", "--out", tmp_path), "is a directory")
