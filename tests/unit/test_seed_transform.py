"""The seed transformation (kernelsmith/seed) on recorded Inductor output (tests/cases/seed/*/):
each record becomes a candidate that parses, defines ModelNew over plain @triton.jit kernels
launched with explicit grids and the recorded configs, and keeps library calls as torch calls;
output the transformation cannot handle gets a one-line reason."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from conftest import CASES

from kernelsmith.candidate import analyze
from kernelsmith.errors import UserError
from kernelsmith.evolve.tuner import apply_config, config_of
from kernelsmith.seed.assemble import candidate_source
from kernelsmith.seed.errors import NoOwnKernel, SeedError
from kernelsmith.seed.record import InductorRecord
from kernelsmith.seed.seed import with_templates
from kernelsmith.task import Task

SEED_CASES = CASES / "seed"
WITH_KERNELS = [
    "gemm_mul_leakyrelu",
    "conv_relu_bias",
    "softmax",
    "layernorm",
    "rowsum_long",
    "conv_min_add_mul",
    "gemm_batchnorm_train",
    "gemm_templates",
    "conv_templates",
]
INDUCTOR_RUNTIME = ("async_compile", "triton_heuristics", "get_raw_stream", "extern_kernels", "empty_strided_cuda")


def load(name: str) -> tuple[InductorRecord, Task]:
    return InductorRecord.load(SEED_CASES / name), Task.from_file(SEED_CASES / name / "task.py", name=name)


def seed_of(name: str) -> str:
    return candidate_source(*load(name))


def launches(source: str) -> dict[str, cst.Call]:
    """Each `K[grid](...)` launch of the candidate, by kernel name."""
    found = m.findall(cst.parse_module(source), m.Call(func=m.Subscript(value=m.Name())))
    return {cst.ensure_type(cst.ensure_type(c, cst.Call).func, cst.Subscript).value.value: c for c in found}  # type: ignore[attr-defined]


def keywords(call: cst.Call) -> dict[str, int]:
    return {a.keyword.value: int(cst.ensure_type(a.value, cst.Integer).value) for a in call.args if a.keyword}


@pytest.mark.parametrize("name", WITH_KERNELS)
def test_a_record_becomes_a_plain_triton_candidate(name):
    record, _ = load(name)
    source = seed_of(name)
    ast.parse(source)
    facts = analyze(source)
    assert facts.syntax_error is None and facts.has_model_new
    launched = launches(source)
    assert set(facts.triton_kernels) == set(launched) and launched, (facts.triton_kernels, list(launched))
    for kernel, call in launched.items():
        config = record.launches[kernel]
        assert keywords(call) == {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
        grid = cst.ensure_type(cst.ensure_type(call.func, cst.Subscript).slice[0].slice, cst.Index).value
        assert isinstance(grid, cst.Tuple) and grid.elements, f"{kernel}: grid {grid}"
    for name_used in INDUCTOR_RUNTIME:  # Inductor's runtime is gone; its helpers may stay imported from torch
        assert name_used not in source, name_used
    assert ".run(" not in source


@pytest.mark.parametrize(
    ("name", "library_call"), [("gemm_mul_leakyrelu", "torch.mm"), ("conv_relu_bias", "torch.convolution")]
)
def test_extern_kernels_stay_library_calls(name, library_call):
    record, _ = load(name)
    assert "extern_kernels." in record.output_code
    calls = m.findall(cst.parse_module(seed_of(name)), m.Call())
    names = {cst.Module([]).code_for_node(cst.ensure_type(c, cst.Call).func) for c in calls}
    assert library_call in names


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rowsum_long"])
def test_reductions_keep_their_reduction_kernels(name):
    record, _ = load(name)
    reductions = [k for k in record.launches if k.startswith(("triton_per_", "triton_red_"))]
    assert reductions and set(reductions) <= set(launches(seed_of(name)))


def test_the_grid_divides_by_the_block_the_launch_passes():
    source = seed_of("gemm_mul_leakyrelu")
    assert "triton_poi_fused_addmm_leaky_relu_mul_0[(triton.cdiv(8192, 256),)]" in source


def test_the_tuner_tunes_a_seed_and_its_grid_follows_the_block():
    source = seed_of("gemm_mul_leakyrelu")
    config = config_of(source)
    key = "triton_poi_fused_addmm_leaky_relu_mul_0.XBLOCK"
    assert config[key] == 256 and "triton_poi_fused_addmm_leaky_relu_mul_0.num_warps" in config
    tuned = apply_config(source, {**config, key: 512})
    assert "[(triton.cdiv(8192, 512),)]" in tuned and "XBLOCK=512" in tuned


def test_a_seed_of_a_model_whose_graph_depends_on_its_mode_runs_in_that_mode_only():
    record, _ = load("gemm_batchnorm_train")  # BatchNorm in training mode: Inductor's code updates its running stats
    assert record.training is True
    source = seed_of("gemm_batchnorm_train")
    assert "if not self.training:" in source and "call .train() first" in source
    eval_record = dataclasses.replace(record, training=False)
    assert "if self.training:" in candidate_source(eval_record, load("gemm_batchnorm_train")[1])
    assert "self.training" not in seed_of("conv_relu_bias")


def test_library_calls_only_is_no_seed():
    with pytest.raises(NoOwnKernel, match="no Triton kernel"):
        seed_of("matmul_only")


@pytest.mark.parametrize("name", ["gemm_templates", "conv_templates"])
def test_a_gemm_or_convolution_seeds_from_inductors_triton_templates(name):
    # Inductor's default code for a plain GEMM or convolution is one library call (matmul_only); the seed's
    # second try forces its Triton templates, and the template kernel does the product itself.
    record, task = load(name)
    assert "max_autotune_gemm_backends='TRITON'" in record.provenance["how"]
    source = seed_of(name)
    template = [k for k in launches(source) if k.startswith("triton_tem_fused_")]
    assert len(template) == 1 and "tl.dot(" in source
    assert "torch.mm" not in source and "torch.convolution" not in source  # no library call does the work
    grid = cst.ensure_type(cst.ensure_type(launches(source)[template[0]].func, cst.Subscript).slice[0].slice, cst.Index)
    assert all(isinstance(e.value, cst.Integer) for e in cst.ensure_type(grid.value, cst.Tuple).elements)  # FixedGrid
    seed = with_templates(task, lambda: record)
    assert seed.templates and seed.source == source


def test_no_seed_from_the_triton_templates_names_the_options_tried_and_why():
    matmul_only, task = load("matmul_only")
    options = "max_autotune=True, max_autotune_gemm_backends='TRITON', max_autotune_conv_backends='TRITON'"
    with pytest.raises(NoOwnKernel) as info:  # the forced code keeps a library call (attention, on the GPU)
        with_templates(task, lambda: matmul_only)
    assert str(info.value) == (
        f"Inductor's default code launches no Triton kernel (library calls only), nor does its code with its "
        f"Triton templates forced ({options}): a library call it keeps has no template (attention, for one)"
    )

    def no_template():
        raise SeedError("Inductor has no Triton template for a library call of the task")

    with pytest.raises(SeedError) as info:  # a transposed or 1-D convolution: Inductor has no choice left
        with_templates(task, no_template)
    assert str(info.value) == (
        f"Inductor's default code launches no Triton kernel (library calls only); with its Triton templates "
        f"forced ({options}): Inductor has no Triton template for a library call of the task"
    )


def _changed(name: str, old: str, new: str) -> str:
    record, task = load(name)
    assert old in record.output_code, old
    with pytest.raises(SeedError) as info:
        candidate_source(dataclasses.replace(record, output_code=record.output_code.replace(old, new)), task)
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_output_the_transformation_cannot_handle_gets_a_one_line_reason():
    assert "FancyGrid" in _changed("softmax", "'grid_type': 'Grid1D'", "'grid_type': 'FancyGrid'")
    assert "cpp kernel" in _changed("softmax", "async_compile.triton(", "async_compile.cpp(")
    assert "extern_kernels.mystery_mm" in _changed(
        "gemm_mul_leakyrelu", "extern_kernels.mm(", "extern_kernels.mystery_mm("
    )
    assert "without a call method" in _changed("softmax", "    def call(self, args):", "    def kall(self, args):")
    assert "no call(args)" in _changed("softmax", "class Runner:", "class Walker:")
    assert "does not parse" in _changed("softmax", "class Runner:", "class Runner")
    assert "Runner's state" in _changed(
        "softmax", "        args.clear()", "        args.clear(); self.partitions[0](args)"
    )


def test_a_kernel_without_a_recorded_config_is_no_seed():
    record, task = load("softmax")
    with pytest.raises(SeedError, match="no launch config"):
        candidate_source(dataclasses.replace(record, launches={}), task)


def test_a_task_name_that_inductor_code_uses_is_no_seed():
    record, task = load("softmax")
    clashing = dataclasses.replace(task, source=task.source + "\n\ndef call(args):\n    return args\n")
    with pytest.raises(SeedError, match="the task defines call"):
        candidate_source(record, clashing)


def test_a_record_round_trips(tmp_path: Path):
    record, _ = load("conv_relu_bias")
    record.save(tmp_path / "r")
    assert InductorRecord.load(tmp_path / "r") == record
    (tmp_path / "r" / "record.json").write_text("{}")
    with pytest.raises(UserError, match="not an Inductor record"):
        InductorRecord.load(tmp_path / "r")
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="cannot keep the Inductor record in .*file/r: Not a directory"):
        record.save(tmp_path / "file" / "r")  # --record under a file: one line, not a traceback
