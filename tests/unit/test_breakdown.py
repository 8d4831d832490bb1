"""The kernel breakdown of a verdict (kernelsmith/evaluate/measuring/breakdown.py) and the profile block of
the mutation prompt (kernelsmith/evolve/profile_block.py), on kernels recorded on the H200."""

from __future__ import annotations

import pytest
from conftest import RECORDED_TASKS, recorded_verdict

from kernelsmith.evaluate.measuring.breakdown import short_name
from kernelsmith.evolve.config import PromptConfig
from kernelsmith.evolve.profile_block import profile_parts
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.prompts import PromptBuilder, PromptParts


@pytest.mark.parametrize("task", RECORDED_TASKS)
def test_the_breakdown_is_per_forward_heaviest_first_and_adds_up(task):
    ev = recorded_verdict(task)
    ms = [k["ms"] for k in ev["kernels"]]
    assert ms == sorted(ms, reverse=True)
    assert sum(k["share"] for k in ev["kernels"]) == pytest.approx(1.0)
    assert ev["kernel_ms"] == pytest.approx(sum(ms))
    # On the H200 the kernels of a forward came within 5% of the verdict's (event-timed) time.
    assert ev["kernel_ms"] == pytest.approx(ev["candidate_ms"], rel=0.05)


def test_a_partial_replacement_shows_the_library_kernels_it_keeps():
    ev = recorded_verdict("1_Conv2D_ReLU_BiasAdd")
    heaviest = ev["kernels"][0]
    assert "implicit_gemm" in heaviest["name"] and not heaviest["own"]  # cuDNN's convolution
    own = [k for k in ev["kernels"] if k["own"]]
    assert [k["name"] for k in own] == ["relu_bias_kernel"] and own[0]["calls"] == 1.0
    assert 0.15 < own[0]["share"] < 0.25


def test_kernel_names_are_shortened_for_readers():
    ref = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
        "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
        "() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::"
        "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar))"
    )  # torch.relu's kernel on the H200
    assert short_name(ref).startswith("at::native::vectorized_elementwise_kernel<4, ")
    assert len(short_name(ref)) <= 90 and "(int," not in short_name(ref)
    assert short_name("relu_kernel") == "relu_kernel"
    assert short_name("void k<1>(float*, int)") == "k<1>"
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"


def test_the_profile_block_names_kernels_shares_and_the_roofline():
    parts = profile_parts(recorded_verdict("1_Conv2D_ReLU_BiasAdd"), budget=900)
    assert parts is not None
    assert "ms of kernels in a measured 3.366 ms" in parts["summary"]
    assert "its own kernels take 19%" in parts["summary"]
    lines = parts["kernels"].splitlines()
    assert lines[0].startswith("- 47% ") and "(library, 1 launch)" in lines[0]
    assert any("relu_bias_kernel (own, 1 launch)" in line for line in lines)
    assert "this program takes 8.63x the floor" in parts["roofline"]


def test_the_profile_block_keeps_to_its_budget():
    ev = recorded_verdict("1_Conv2D_ReLU_BiasAdd")
    parts = profile_parts(ev, budget=500)
    assert parts is not None
    lines = parts["kernels"].splitlines()
    assert 2 < len(lines) < len(ev["kernels"]) and lines[-1].endswith("more kernels")
    assert len(parts["summary"]) + sum(len(line) + 1 for line in lines[:-1]) <= 500 + 1  # then the sum line
    tiny = profile_parts(ev, budget=100)  # the heaviest kernel is shown whatever the budget
    assert tiny is not None and len(tiny["kernels"].splitlines()) == 2


def test_no_block_without_a_breakdown_or_a_floor():
    assert profile_parts({"status": "correct", "kernels": [{"name": "add", "count": 3, "own": False}]}, 900) is None


def test_the_prompt_shows_the_parents_profile_and_not_the_others():
    ev = recorded_verdict("19_ReLU")
    parent = Program(
        id=7, iteration=3, island=0, operator="rewrite", code="x = 1\n", status="correct", speedup=0.98, eval=ev
    )
    parent.candidate_ms = ev["candidate_ms"]
    other = Program(id=8, iteration=4, island=0, operator="rewrite", code="y = 2\n", status="correct", eval=ev)
    builder = PromptBuilder(PromptConfig())
    text = builder.messages(
        PromptParts(operator="rewrite", task_name="relu", task_code="pass", hardware={}, parent=parent, top=[other])
    )[1]["content"]
    assert text.count("where its time goes") == 1
    current = text.split("# Current program", 1)[1].split("# Best programs", 1)[0]
    assert "- 100% 3.032 ms relu_kernel (own, 1 launch)" in current
    assert "this program takes 1x the floor" in current


def test_a_template_folder_without_the_profile_placeholder_still_renders(tmp_path):
    (tmp_path / "program.txt").write_text("## $title\n$metrics\n$code\n")
    ev = recorded_verdict("19_ReLU")
    p = Program(id=1, iteration=0, island=0, operator="seed", code="x = 1\n", status="correct", eval=ev)
    text = PromptBuilder(PromptConfig(templates_dir=str(tmp_path))).program("p", p, profile=True)
    assert "where its time goes" not in text and "x = 1" in text


def test_the_prompt_shows_the_parents_counters_within_the_budget():
    from conftest import recorded_counters

    ev = {**recorded_verdict("19_ReLU"), "counters": recorded_counters()}
    parent = Program(id=7, iteration=3, island=0, operator="rewrite", code="x = 1\n", status="correct", eval=ev)
    parent.candidate_ms = ev["candidate_ms"]
    text = PromptBuilder(PromptConfig()).program("Current program", parent, profile=True)
    assert "hardware counters (Nsight Compute, heaviest kernels):" in text
    line = next(ln for ln in text.splitlines() if "distribution_elementwise_grid_stride_kernel" in ln)
    assert "compute-bound: SM at 69% of peak (DRAM 40%)" in line and "52 registers/thread" in line
    assert "- 100% 3.032 ms relu_kernel" in text  # the breakdown still comes first
    parts = profile_parts(ev, budget=900)
    assert parts is not None and len(parts["counters"]) <= 900 // 3 + 200  # one kernel line may run over
    # a report without counters (ncu missing, not permitted, failed) adds nothing to the prompt
    for status in ("missing", "not_permitted", "failed"):
        quiet = profile_parts({**ev, "counters": {"status": status, "message": "x"}}, budget=900)
        assert quiet is not None and quiet["counters"] == ""
