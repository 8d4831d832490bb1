"""The seed step's trace of a task (kernelsmith/seed/inductor.py), on the CPU: the flat function that
Inductor compiles takes exactly the Model's parameters, buffers and tensor inputs (`call(args)`'s
order), in the mode the evaluator runs the Model in, and does what the Model's forward does."""

from __future__ import annotations

import pytest
import torch
from conftest import CASES

from kernelsmith.seed.errors import SeedError
from kernelsmith.seed.inductor import inductor_code, inductor_options, model_and_inputs, trace_flat
from kernelsmith.task import Task

SEED_CASES = CASES / "seed"


def traced(name: str):
    model, inputs = model_and_inputs(Task.from_file(SEED_CASES / name / "task.py", name=name), "cpu")
    return model, inputs, trace_flat(model, inputs)


def test_a_tensor_the_forward_makes_from_a_number_is_folded_not_an_extra_argument():
    # KernelBench L2/31: torch.min(x, torch.tensor(c)). make_fx kept the tensor as a buffer of the traced
    # graph module, which compile_fx lifted to a fifth argument of call(args): the seed passed four.
    model, inputs, flat = traced("conv_min_add_mul")
    assert dict(flat.graph.named_buffers()) == {}
    assert [n.op for n in flat.graph.graph.nodes].count("get_attr") == 0
    placeholders = [n for n in flat.graph.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(flat.state) + len(flat.tensor_inputs) == len(flat.args)
    with torch.no_grad():
        torch.testing.assert_close(flat.graph(*flat.args), model(*inputs))


def test_a_tensor_constant_of_more_than_one_element_is_no_seed_with_a_reason():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x + torch.tensor([1.0, 2.0, 3.0])

    with pytest.raises(SeedError, match=r"a tensor of shape \(3,\) that is neither a parameter, a buffer nor an input"):
        trace_flat(Model(), [torch.randn(2, 3)])


def test_batchnorm_is_traced_in_training_mode_as_the_evaluator_runs_it_running_stats_updated():
    # KernelBench L2/73 and L2/97: the evaluator builds the Model as constructed (training mode: batch
    # statistics, running statistics updated); the seed was traced after .eval() (running statistics).
    name = "gemm_batchnorm_train"
    model, inputs, flat = traced(name)
    assert model.training and flat.training is True  # the seed is for this mode: its graph depends on it
    fresh = model_and_inputs(Task.from_file(SEED_CASES / name / "task.py", name=name), "cpu")[0].state_dict()
    with torch.no_grad():
        model.load_state_dict(fresh)
        expected = model(*inputs)
        updated = {n: b.clone() for n, b in model.named_buffers()}
        model.load_state_dict(fresh)  # flat.args share the Model's storage: the traced function's updates show
        got = flat.graph(*flat.args)
    torch.testing.assert_close(got, expected)
    assert not torch.equal(updated["bn.running_mean"], fresh["bn.running_mean"])
    for buffer, value in model.named_buffers():
        torch.testing.assert_close(value, updated[buffer], msg=buffer)


def test_a_model_whose_graph_does_not_depend_on_its_mode_has_no_mode():
    assert traced("conv_min_add_mul")[2].training is None


def test_the_template_options_are_inductors_own():
    from torch._inductor import config

    options = inductor_options(True)
    assert options["max_autotune_gemm_backends"] == options["max_autotune_conv_backends"] == "TRITON"
    with config.patch(options):  # an option this torch's config does not have would raise here
        assert config.max_autotune and config.max_autotune_gemm_backends == "TRITON"
    assert "max_autotune" not in inductor_options(False)


def test_no_triton_template_for_a_library_call_is_said_so(monkeypatch):
    # With ATen left out of the backends, a convolution no template takes (transposed, 1-D, dilated) leaves
    # Inductor's algorithm selection no choice: its NoValidChoicesError, as Inductor wraps it.
    import torch._inductor.compile_fx as compile_fx

    def no_choices(*args, **kwargs):
        raise RuntimeError("LoweringException: NoValidChoicesError: No choices to select. Provided reason: ...")

    monkeypatch.setattr(compile_fx, "compile_fx", no_choices)
    flat = traced("conv_min_add_mul")[2]
    with pytest.raises(SeedError, match=r"^Inductor has no Triton template for a library call of the task \(it has"):
        inductor_code(flat, templates=True)
    with pytest.raises(SeedError, match="^Inductor could not compile the task: LoweringException"):
        inductor_code(flat, templates=False)


def test_a_gpu_without_triton_is_said_in_one_line(monkeypatch):
    import sys

    from kernelsmith.seed.inductor import record_task

    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    with pytest.raises(SeedError, match="^seed needs Triton .* not installed$"):
        record_task(Task.from_file(SEED_CASES / "softmax" / "task.py"))


def test_the_seed_compiles_at_the_precision_the_judge_runs_the_reference_at(monkeypatch):
    """Issue 47: seeds of KernelBench L2/21 and L2/71 (conv + pointwise) were incorrect on an H100, their
    convolution in TF32 against a float32 reference. Inductor reads the TF32 flags while it compiles (its
    templates' ALLOW_TF32): they must be the evaluation's (runtime.PRECISION, which the judge and the sandbox
    set at their start) whatever this process had, and this process's own are back afterwards."""
    import torch._inductor.compile_fx as compile_fx
    from torch._inductor.graph import GraphLowering

    from kernelsmith.evaluate.runtime import PRECISION, precision_flags, set_precision

    seen: list[dict] = []

    def compile_and_look(graph, args):
        seen.append(precision_flags())
        GraphLowering.save_output_code("# the output code")
        return graph

    monkeypatch.setattr(compile_fx, "compile_fx", compile_and_look)
    flat = traced("conv_min_add_mul")[2]
    before = precision_flags()
    # cuDNN's TF32 on, as torch has it by default; matmul's TF32 on, as a user may set it
    tf32 = {**PRECISION, "cudnn.allow_tf32": True, "cuda.matmul.allow_tf32": True, "float32_matmul_precision": "high"}
    set_precision(tf32)
    try:
        inductor_code(flat)
        assert seen == [PRECISION]
        assert precision_flags() == tf32
    finally:
        set_precision(before)
