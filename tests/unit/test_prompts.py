"""kernelsmith.evolve.prompts: mutation prompts rendered from the bundled (or a user's) templates."""

from __future__ import annotations

import pytest

from kernelsmith.errors import UserError
from kernelsmith.evolve import prompts
from kernelsmith.evolve.config import PromptConfig
from kernelsmith.evolve.program import NO_PROGRAM, Program
from kernelsmith.evolve.prompts import PromptBuilder, PromptParts

TASK_CODE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
CPU = {"device": "cpu", "name": "Test CPU"}
H100 = {"device": "cuda", "name": "H100", "capability": "9.0", "sm_count": 132, "memory_gb": 80}


def prog(id: int = 1, status: str = "correct", code: str | None = "def kernel(): pass\n", **kw) -> Program:
    return Program(
        iteration=kw.pop("iteration", 0),
        island=0,
        operator=kw.pop("operator", "rewrite"),
        code=code,
        status=status,
        id=id,
        **kw,
    )


def parts(operator: str = "rewrite", **kw) -> PromptParts:
    return PromptParts(operator=operator, task_name="relu", task_code=TASK_CODE, hardware=CPU, **kw)


@pytest.fixture
def builder() -> PromptBuilder:
    return PromptBuilder(PromptConfig())


# --- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("operator", prompts.OPERATORS)
def test_every_operator_renders_a_system_and_a_user_message(builder, operator):
    msgs = builder.messages(parts(operator, parent=prog()))
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert all("$" not in m["content"] for m in msgs)  # no placeholder left over
    assert not msgs[0]["content"].endswith("\n") and not msgs[1]["content"].endswith("\n")
    op_text = (prompts.BUNDLED / f"op_{operator}.txt").read_text().rstrip("\n")
    assert msgs[1]["content"].endswith("# What to do now\n" + op_text)


def test_diff_asks_for_search_replace_edits_and_others_for_a_whole_program(builder):
    diff_system = builder.messages(parts("diff", parent=prog()))[0]["content"]
    rewrite_system = builder.messages(parts("rewrite", parent=prog()))[0]["content"]
    assert "<<<<<<< SEARCH" in diff_system and "```python fenced block" not in diff_system
    assert "```python fenced block" in rewrite_system and "<<<<<<< SEARCH" not in rewrite_system


def test_unknown_operator_is_an_error(builder):
    with pytest.raises(ValueError, match="unknown operator mutate"):
        builder.messages(parts("mutate"))


def test_the_user_message_shows_the_task_and_the_hardware(builder):
    user = builder.messages(parts("translate"))[1]["content"]
    assert "# Task: relu" in user
    assert "```python\n" + TASK_CODE.rstrip("\n") + "\n```" in user
    assert "Test CPU running the Triton interpreter" in user


def test_translate_without_programs_has_no_program_sections(builder):
    user = builder.messages(parts("translate"))[1]["content"]
    assert "# Current program" not in user and "# Recent attempts" not in user


def test_code_with_dollars_and_braces_is_shown_verbatim(builder):
    code = "x = {'a': 1}\ncost = '$x ${y} $$'\n"
    user = builder.messages(parts(parent=prog(code=code)))[1]["content"]
    assert "cost = '$x ${y} $$'" in user
    assert "x = {'a': 1}" in user


# --- sections --------------------------------------------------------------------------------


def test_sections_appear_in_order_with_their_programs(builder):
    p = parts(
        "crossover",
        parent=prog(1, code="PARENT\n"),
        second=prog(2, code="SECOND\n"),
        top=[prog(3, code="TOP\n")],
        inspirations=[prog(4, code="INSPIRATION\n")],
        history=[prog(5, status="incorrect", error="bad max error")],
    )
    text = builder.sections(p)
    heads = [
        "# Current program\n## program #1",
        "# Second parent\n## program #2",
        "# Best programs so far\n## program #3",
        "# Different approaches that also work\n## program #4",
        "# Recent attempts (newest first)\n- #5",
    ]
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    for code in ("PARENT", "SECOND", "TOP", "INSPIRATION"):
        assert f"```python\n{code}\n```" in text


def test_no_sections_is_the_empty_string(builder):
    assert builder.sections(parts()) == ""


def test_program_block_without_code_is_empty_not_none(builder):
    text = builder.program("program #9", prog(9, status=NO_PROGRAM, code=None))
    assert "```python\n\n```" in text
    assert "None" not in text


# --- feedback and its budget ------------------------------------------------------------------


def test_feedback_shows_the_error_of_the_evaluator(builder):
    text = builder.program("program #1", prog(status="runtime_error", error="IndexError: out of bounds"))
    assert "feedback from the evaluator:\nIndexError: out of bounds" in text


def test_feedback_of_a_program_without_error_or_flags_is_empty(builder):
    assert builder.feedback(prog()) == ""


def test_an_error_within_the_budget_is_kept_whole():
    b = PromptBuilder(PromptConfig(error_chars=100))
    text = b.feedback(prog(status="runtime_error", error="e" * 100))
    assert text == "\nfeedback from the evaluator:\n" + "e" * 100


def test_an_error_over_the_budget_is_cut_and_marked():
    b = PromptBuilder(PromptConfig(error_chars=100))
    text = b.feedback(prog(status="runtime_error", error="a" * 100 + "TAIL"))
    assert text == "\nfeedback from the evaluator:\n" + "a" * 100 + " [...]"
    assert "TAIL" not in text


def test_the_budget_applies_to_every_program_in_a_prompt():
    b = PromptBuilder(PromptConfig(error_chars=100))
    p = parts(parent=prog(1, status="incorrect", error="x" * 500), top=[prog(2, status="incorrect", error="y" * 500)])
    user = b.messages(p)[1]["content"]
    assert "x" * 101 not in user and "y" * 101 not in user
    assert user.count(" [...]") == 2


def test_flag_details_appear_in_the_feedback(builder):
    p = prog(flags=["torch_compute_op"], eval={"flag_details": {"torch_compute_op": "aten::relu ran in forward"}})
    assert "flag torch_compute_op: aten::relu ran in forward" in builder.feedback(p)


def test_error_and_flags_come_in_that_order(builder):
    p = prog(status="incorrect", error="wrong values", eval={"flag_details": {"f1": "one", "f2": "two"}})
    assert builder.feedback(p) == "\nfeedback from the evaluator:\nwrong values\nflag f1: one\nflag f2: two"


# --- metrics lines ---------------------------------------------------------------------------


def test_metrics_of_a_program_without_code():
    assert (
        prompts.metrics_line(prog(status=NO_PROGRAM, code=None)) == "status: no program (the reply held no usable code)"
    )


@pytest.mark.parametrize("status", ["incorrect", "compile_error", "runtime_error", "timeout", "rejected"])
def test_metrics_of_a_failed_program_are_its_status(status):
    assert prompts.metrics_line(prog(status=status, speedup=3.0)) == f"status: {status}"


def test_metrics_of_a_correct_program_show_speedups_and_runtimes():
    p = prog(speedup=2.5, speedup_vs_compile=1.25, candidate_ms=0.5, eval={"reference_ms": 1.25, "compile_ms": 0.625})
    assert prompts.metrics_line(p) == (
        "status: correct; speedup 2.5x vs PyTorch eager, 1.25x vs torch.compile; runtime 0.5 ms "
        "(eager 1.25 ms, torch.compile 0.625 ms)"
    )


def test_metrics_of_a_correct_program_without_numbers_use_dashes():
    assert prompts.metrics_line(prog()) == "status: correct; speedup - vs PyTorch eager, - vs torch.compile"


def test_metrics_without_a_compile_baseline_close_the_parenthesis():
    p = prog(speedup=2.0, candidate_ms=1.0, eval={"reference_ms": 2.0})
    assert prompts.metrics_line(p).endswith("; runtime 1 ms (eager 2 ms)")


def test_metrics_of_a_flagged_program_say_it_does_not_count():
    line = prompts.metrics_line(prog(speedup=9.0, flags=["torch_compute_op"]))
    assert line.endswith("; flagged torch_compute_op, so it does not count as a success")


def test_metrics_of_an_unflagged_correct_program_do_not_mention_flags():
    assert "flagged" not in prompts.metrics_line(prog(speedup=9.0))


def test_a_legacy_task_note_among_the_flags_is_not_held_against_the_program():
    line = prompts.metrics_line(prog(speedup=2.0, flags=["degenerate_task"]))
    assert "flagged" not in line


# --- history ---------------------------------------------------------------------------------


def test_history_line_shows_origin_and_outcome(builder):
    p = prog(7, status="incorrect", iteration=3, operator="diff", parent_id=4, error="max abs err 0.5")
    assert builder.history_line(p) == "- #7 (iteration 3, diff of #4): incorrect: max abs err 0.5"


def test_history_line_of_a_seed_has_no_parent(builder):
    assert builder.history_line(prog(1, operator="seed", speedup=1.0)).startswith("- #1 (iteration 0, seed): correct;")


def test_history_error_is_one_line_of_at_most_240_characters(builder):
    error = "Traceback:\n  line one\n\n" + "z" * 400
    line = builder.history_line(prog(2, status="runtime_error", error=error))
    outcome = line.split("runtime_error: ", 1)[1]
    assert "\n" not in line
    assert outcome.startswith("Traceback: line one zzz")
    assert len(outcome) == 240


def test_history_shows_no_error_for_a_correct_program(builder):
    assert "stale" not in builder.history_line(prog(2, error="stale warning"))


# --- hardware --------------------------------------------------------------------------------


def test_cpu_hardware_says_timings_mean_little():
    text = prompts.hardware_text({"device": "cpu"})
    assert text.startswith("CPU running the Triton interpreter")
    assert "say little about GPU speed" in text


def test_gpu_hardware_lists_its_facts():
    assert prompts.hardware_text(H100) == "H100 (compute capability 9.0): 132 SMs, 80 GB memory."


def test_gpu_hardware_adds_measured_ceilings_when_known():
    text = prompts.hardware_text({**H100, "bandwidth_gbps": 3000, "bf16_tflops": 700})
    assert text.endswith("; measured copy bandwidth 3000 GB/s; measured dense bf16 matmul 700 TFLOP/s.")


def test_gpu_hardware_with_missing_facts_uses_question_marks():
    assert prompts.hardware_text({"device": "cuda", "name": "GPU"}) == "GPU (compute capability ?): ? SMs, ? GB memory."


# --- templates -------------------------------------------------------------------------------


def test_a_users_template_replaces_the_bundled_one_by_name(tmp_path):
    (tmp_path / "op_rewrite.txt").write_text("MY OWN INSTRUCTION for $$ and $$ only\n")
    b = PromptBuilder(PromptConfig(templates_dir=str(tmp_path)))
    user = b.messages(parts(parent=prog()))[1]["content"]
    assert user.endswith("# What to do now\nMY OWN INSTRUCTION for $ and $ only")
    assert "You are an expert GPU kernel engineer" in b.messages(parts(parent=prog()))[0]["content"]  # bundled


def test_a_templates_dir_that_is_not_a_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="is not a folder"):
        PromptBuilder(PromptConfig(templates_dir=str(tmp_path / "missing")))


def test_a_missing_template_is_a_user_error(builder):
    with pytest.raises(UserError, match="prompt template op_nothing.txt not found"):
        builder.render("op_nothing")


def test_a_placeholder_without_a_value_is_a_user_error(tmp_path):
    (tmp_path / "program.txt").write_text("## $title $unknown_value\n")
    b = PromptBuilder(PromptConfig(templates_dir=str(tmp_path)))
    with pytest.raises(UserError, match=r"program.txt uses \$unknown_value, which is not provided"):
        b.program("program #1", prog())


def test_templates_are_read_once(tmp_path):
    path = tmp_path / "op_repair.txt"
    path.write_text("first\n")
    b = PromptBuilder(PromptConfig(templates_dir=str(tmp_path)))
    assert b.render("op_repair") == "first\n"
    path.write_text("second\n")
    assert b.render("op_repair") == "first\n"


def test_a_rejection_whose_error_is_its_flag_detail_says_it_once(builder):
    why = "trial 1: none of the candidate's own kernels ran on the device during forward"
    p = prog(
        status="rejected", error=why, eval={"flags": ["no_custom_kernel"], "flag_details": {"no_custom_kernel": why}}
    )
    text = builder.feedback(p)
    assert text.count(why) == 1
    assert text == "\nfeedback from the evaluator:\n" + why
