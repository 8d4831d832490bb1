"""The seed step on a GPU: a seed computes at the precision the judge's reference runs at (issue 47).

On an H100, seeds of KernelBench L2/21 and L2/71 (convolution + pointwise) were `incorrect`: 1000x the eager
reference's own error against float64, their convolution in TF32. torch lets cuDNN use TF32 by default and
cuDNN picks a TF32 kernel or not by layout and shape: the eager NCHW reference ran in float32, Inductor's
channels-last convolution in TF32. The judge, the sandbox and the seed step now all run at
kernelsmith.evaluate.runtime.PRECISION (TF32 off). Skipped without a GPU (`pytest -m cuda`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelsmith.evaluate import EvalOptions, EvalPool
from kernelsmith.evaluate.runtime import evaluation_precision
from kernelsmith.task import Task

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

REPO = Path(__file__).resolve().parents[2]
CONV_TASK = REPO / "benchmarks/kernelbench/problems/level2/71_Conv2d_Divide_LeakyReLU.py"  # one of the two
FLOAT32_CONV_ERROR = 1e-4  # float32 sums of 72 products land ~1e-6 off float64; TF32 ~1e-3


def _conv_error(conv: torch.nn.Conv2d, x: torch.Tensor, channels_last: bool) -> float:
    with torch.no_grad():
        exact = torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double())
        if channels_last:
            x, conv = x.to(memory_format=torch.channels_last), conv.to(memory_format=torch.channels_last)
        got = conv(x).double()
    return float((got - exact).abs().max() / exact.abs().max())


def test_at_the_evaluations_precision_a_convolution_is_float32_in_either_layout():
    """The mechanism: under PRECISION both layouts of L2/71's convolution are float32-accurate (under torch's
    defaults, printed for the record, cuDNN may take TF32 for one of them)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 64, 3).cuda()
    x = torch.rand(16, 8, 128, 128, device="cuda")
    defaults = {layout: _conv_error(conv, x, layout) for layout in (False, True)}
    with evaluation_precision():
        pinned = {layout: _conv_error(conv, x, layout) for layout in (False, True)}
    print(f"relative max error against float64, NCHW / channels-last: torch's defaults {defaults}, PRECISION {pinned}")
    assert max(pinned.values()) < FLOAT32_CONV_ERROR, pinned


def test_the_seed_of_a_convolution_task_is_a_success(tmp_path):
    """KernelBench L2/71 at its real size, seeded and judged: correct, compiled at the evaluation's precision."""
    from kernelsmith.seed.seed import seed_task

    task = Task.from_file(CONV_TASK)
    seed = seed_task(task, record_dir=tmp_path)
    assert "cudnn.allow_tf32=False" in seed.record.provenance["precision"], seed.record.provenance
    assert "ALLOW_TF32 : tl.constexpr = True" not in seed.source
    opts = EvalOptions(device="cuda", timeout=300, trials=2, compile_baseline=False)
    with EvalPool(device="cuda", workers=1, options=opts) as pool:
        r = pool.evaluate(task, seed.source, opts)
    assert r.success, (r.status.value, r.error, [t.message for t in r.trials])
