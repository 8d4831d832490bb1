"""A task captured at several shapes (`kernelsmith capture --shape`, issue 55) names its sizes' values at each
other shape (SHAPES): the evaluation judges a kernel at every one, its trials at the main shape and one at each
other. A kernel that reads its sizes from its inputs is correct; one that hard-codes the main shape is not,
and the verdict names the shape. `--small` keeps the shapes its CPU sizes do not cut."""

from __future__ import annotations

from conftest import TRIALS

from kernelsmith.evaluate import Status
from kernelsmith.task import Task
from kernelsmith.task_sizes import read_shapes, shrink

TASK = """
import torch
import torch.nn as nn


X0_DIM0 = 1
X0_DIM1 = 96

CPU_SIZES = {'X0_DIM0': 1, 'X0_DIM1': 96}

SHAPES = [{'X0_DIM0': 4}, {'X0_DIM0': 3}]


class Model(nn.Module):
    def forward(self, x0, x1):
        v2 = torch.ops.aten.silu.default(x0)
        return torch.ops.aten.mul.Tensor(v2, x1)


def get_inputs():
    return [torch.randn([X0_DIM0, X0_DIM1]), torch.randn([X0_DIM0, X0_DIM1])]


def get_init_inputs():
    return []
"""

KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, a * tl.sigmoid(a) * b, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x0, x1):
        a, b = x0.contiguous(), x1.contiguous()
        y = torch.empty_like(a)
        n = NUMEL
        silu_mul_kernel[(triton.cdiv(n, 128),)](a, b, y, n, BLOCK_SIZE=128)
        return y
"""


def test_a_kernel_is_judged_at_every_shape_of_its_task(cpu_pool):
    task = Task.from_source(TASK, name="silu_mul")
    done = cpu_pool.submit(task, KERNEL.replace("NUMEL", "a.numel()")).result(timeout=300)
    assert done.status == Status.correct, done.error
    assert [t.sizes for t in done.trials] == [None] * TRIALS + [{"X0_DIM0": 4}, {"X0_DIM0": 3}]
    assert all(t.ok for t in done.trials)


def test_a_kernel_that_holds_at_the_main_shape_only_is_incorrect_and_the_shape_said(cpu_pool):
    task = Task.from_source(TASK, name="silu_mul")
    done = cpu_pool.submit(task, KERNEL.replace("NUMEL", "96")).result(timeout=300)  # the main shape's numel
    assert done.status == Status.incorrect
    assert done.error is not None and done.error.startswith("the trial at X0_DIM0=4 (the task's SHAPES): ")
    assert [t.ok for t in done.trials] == [True] * TRIALS + [False]


def test_small_keeps_the_shapes_its_cpu_sizes_do_not_cut():
    sized = TASK.replace("SHAPES = [{'X0_DIM0': 4}, {'X0_DIM0': 3}]", "SHAPES = [{'X0_DIM0': 4, 'X0_DIM1': 2048}]")
    sized = sized.replace("X0_DIM1 = 96", "X0_DIM1 = 1024").replace("'X0_DIM1': 96}", "'X0_DIM1': 16}")
    assert read_shapes(shrink(sized)) == [{"X0_DIM0": 4}]  # the cut width is its CPU size at every shape
    assert read_shapes(shrink(sized.replace("'X0_DIM0': 4, ", ""))) == []  # the main one at --small
    assert read_shapes(shrink(TASK)) == [{"X0_DIM0": 4}, {"X0_DIM0": 3}]
