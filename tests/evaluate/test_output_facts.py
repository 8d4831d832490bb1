"""An output (or an input coming back) that lives otherwise than the reference's gets a verdict.

On an H100 an empty CUDA input travelled as CPU bytes and `torch.equal` between it and the judge's
CUDA input raised in the judge: the evaluation worker failed and `optimize` stopped (issue 54). Here
the CPU stands in for the GPU and `meta` for another device: each tensor message says where the tensor
lived, the judge places it there or says `incorrect` and why, on every path that compares (the trials,
the timed call's output, the judge-timed batch, the inputs after the call).
"""

from __future__ import annotations

import pytest
import torch
from conftest import MEMORY_LIMIT, case_path

from kernelsmith.evaluate import EvalResult, Status
from kernelsmith.evaluate.judging.judge import Judge
from kernelsmith.evaluate.judging.leaves import Facts, facts_differ, input_changed, outputs_against
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import encode_tensor, tensor_facts
from kernelsmith.task import Task

# Long enough for the timing stage and the judge-timed batch of a small task under the interpreter.
OPTIONS = EvalOptions(device="cpu", timeout=60.0, memory_limit=MEMORY_LIMIT, trials=1)


def lived_on(t: torch.Tensor, device: str) -> dict:
    """`t`'s message as if `t` had lived on `device`: how an empty CUDA tensor travels (CPU bytes)."""
    return {**encode_tensor(t), "on": device}


# -- the judge's side, message by message -----------------------------------------------------------


def test_an_output_on_another_device_is_said_before_its_values_are_read():
    ref = [torch.zeros(3, device="meta"), torch.ones(2)]
    got, wrong = outputs_against(ref, [encode_tensor(torch.ones(3)), encode_tensor(torch.ones(2))])
    assert wrong == "output 0 is on cpu, the reference's on meta"


def test_an_empty_tensor_that_lived_on_the_reference_device_is_compared_there():
    ref = [torch.empty(2, 0, device="meta")]
    got, wrong = outputs_against(ref, [lived_on(torch.empty(2, 0), "meta")])
    assert wrong is None and got[0].device.type == "meta" and got[0].shape == (2, 0)


def test_the_crash_of_issue_54_an_empty_input_back_as_cpu_bytes_is_an_unchanged_input():
    """judge.check as GPT-2's attention task met it: an empty input on the device, back as CPU bytes."""
    out, empty = torch.ones(4), torch.empty(1, 2, 0, 8, device="meta")
    msg = {
        "structure": "tensor",
        "outputs": [encode_tensor(out.clone())],
        "inputs": [lived_on(torch.empty(1, 2, 0, 8), "meta")],
    }
    cmp = Judge.check(None, msg, out, [empty], EvalOptions(device="cpu"))  # type: ignore[arg-type]  # check uses no state
    assert cmp.ok, cmp.message


@pytest.mark.parametrize(
    "sent, says",
    [
        pytest.param(torch.ones(3, device="meta"), "input 0 is on meta, the reference's on cpu", id="device"),
        pytest.param(
            torch.ones(3, dtype=torch.float64), "input 0: dtype torch.float64 but expected torch.float32", id="dtype"
        ),
        pytest.param(torch.ones(2), "input 0: shape (2,) but expected (3,)", id="shape"),
        pytest.param(torch.ones(3).to_sparse(), "input 0 has layout sparse_coo, the reference's strided", id="layout"),
    ],
)
def test_an_input_that_came_back_otherwise_says_which(sent, says):
    said = input_changed([torch.ones(3)], [encode_tensor(sent)])
    assert said == f"forward modified its input 0 in place (the reference does not): {says}"


def test_an_input_with_other_values_is_modified_in_place():
    assert input_changed([torch.ones(3), 7], [encode_tensor(torch.zeros(3)), {"kind": "value", "value": 7}]) == (
        "forward modified its input 0 in place (the reference does not)"
    )
    assert input_changed([torch.ones(3)], [encode_tensor(torch.ones(3))]) is None


def test_the_batch_facts_say_where_its_outputs_lived():
    ref = [Facts.of(torch.ones(2, 3)), None]
    meta = {"kind": "facts", **tensor_facts(torch.ones(2, 3, device="meta"))}
    assert facts_differ(ref, [meta, {"kind": "value", "value": None}]) == "output 0 is on meta, the reference's on cpu"
    same = {"kind": "facts", **tensor_facts(torch.ones(2, 3))}
    assert facts_differ(ref, [same, {"kind": "value", "value": None}]) is None


def test_a_tensor_where_the_reference_returns_a_number_is_no_crash():
    from kernelsmith.evaluate.checks import compare_outputs

    cmp = compare_outputs([3], [torch.ones(4)], None, None)
    assert not cmp.ok and "expected 3" in (cmp.message or "")


# -- whole evaluations on the CPU pool --------------------------------------------------------------

ROWSUM = '''
import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def in_batch():
    """Whether the sandbox's judge-timed batch made this call."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name in ("batch", "graph_batch") and f.f_code.co_filename.endswith("sandbox.py"):
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor):
        self.calls += 1
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return RETURN
'''


@pytest.mark.parametrize(
    "returns, says",
    [
        pytest.param('out.to("meta")', "trial 1 of 1: output is on meta, the reference's on cpu", id="device"),
        pytest.param("out.double()", "output: dtype torch.float64 but expected torch.float32", id="dtype"),
        pytest.param("out.unsqueeze(-1)", "output: shape (64, 1) but expected (64,)", id="shape"),
        pytest.param(
            "(out,)", "forward returned a tuple of 1 (a tensor) where the reference returns a tensor", id="tuple"
        ),
        pytest.param("out.to_sparse()", "output has layout sparse_coo, the reference's strided", id="layout"),
        pytest.param(
            "(setattr(x, 'data', x.data.double()), out)[1]",
            "forward modified its input 0 in place (the reference does not): input 0: dtype torch.float64",
            id="input-dtype",
        ),
        pytest.param(
            'out if self.calls <= 2 else out.to("meta")',
            "output of a timed call: output is on meta, the reference's on cpu",
            id="timed-call-device",
        ),
        pytest.param(
            'out.to("meta") if in_batch() else out',
            "the judge-timed calls: output is on meta, the reference's on cpu",
            id="batch-device",
        ),
    ],
)
def test_an_output_that_lives_otherwise_is_incorrect_and_says_which(cpu_pool, tmp_path, returns, says):
    path = tmp_path / "candidate.py"
    path.write_text(ROWSUM.replace("RETURN", returns))
    r: EvalResult = cpu_pool.submit(Task.from_file(case_path("rowsum_task")), path.read_text(), OPTIONS).result(300)
    assert r.status == Status.incorrect, f"{r.status.value}: {r.error}"
    assert says in (r.error or ""), r.error
