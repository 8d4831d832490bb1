"""Static reading of task and candidate files: no code is executed here."""

from __future__ import annotations

import textwrap

import pytest

from kernelsmith.candidate import Candidate, analyze
from kernelsmith.errors import CandidateError, TaskError, UserError
from kernelsmith.task import Task

TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return x * 2


    def get_inputs():
        return [torch.randn(4, 4)]


    def get_init_inputs():
        return []
''')


# -- Task --------------------------------------------------------------------------------------


def test_task_from_source():
    t = Task.from_source(TASK, name="double")
    assert t.name == "double" and t.source == TASK and t.path is None


def test_task_from_file(case):
    p = case("rowsum_task")
    t = Task.from_file(p)
    assert t.name == "rowsum_task"
    assert t.path == str(p)
    assert t.source == p.read_text()


def test_task_without_model():
    src = TASK.replace("class Model(nn.Module)", "class Other(nn.Module)")
    with pytest.raises(TaskError, match=r"is not a task: no Model defined at top level"):
        Task.from_source(src, name="t")


def test_task_without_get_inputs():
    src = TASK.replace("def get_inputs()", "def make_inputs()")
    with pytest.raises(TaskError, match=r"is not a task: no get_inputs defined"):
        Task.from_source(src, name="t")


def test_task_without_either(case):
    with pytest.raises(TaskError, match=r"no Model and no get_inputs"):
        Task.from_file(case("not_a_task"))


def test_task_nested_model_does_not_count():
    src = "import torch\n\ndef f():\n    class Model(torch.nn.Module):\n        pass\n\ndef get_inputs():\n    return []\n"
    with pytest.raises(TaskError, match="no Model"):
        Task.from_source(src)


def test_task_syntax_error(case):
    with pytest.raises(TaskError, match=r"syntax error at line 8"):
        Task.from_file(case("fault_syntax_error"))


def test_task_missing_file(tmp_path):
    with pytest.raises(TaskError, match="task file not found"):
        Task.from_file(tmp_path / "nope.py")


def test_task_saved_with_a_byte_order_mark_is_read_as_python_reads_it(tmp_path):
    # Windows editors save UTF-8 with a BOM; Python runs such a file, so it is a task.
    p = tmp_path / "bom.py"
    p.write_bytes(b"\xef\xbb\xbf" + TASK.encode("utf-8"))
    t = Task.from_file(p)
    assert t.source == TASK and t.hash == Task.from_source(TASK).hash


def test_task_errors_are_user_errors():
    assert issubclass(TaskError, UserError) and issubclass(CandidateError, UserError)
    assert TaskError.exit_code == 2


def test_task_hash_is_stable(tmp_path):
    a = Task.from_source(TASK, name="a")
    p = tmp_path / "elsewhere.py"
    p.write_text(TASK)
    b = Task.from_file(p)
    assert a.hash == b.hash  # same text, wherever it lives and whatever it is called
    assert len(a.hash) == 16 and int(a.hash, 16) >= 0
    assert a.hash == Task.from_source(TASK).hash
    # the program identity: a comment or another layout is the same task, other code is not
    assert Task.from_source(TASK + "\n# changed\n").hash == a.hash
    assert Task.from_source(TASK + "\nEXTRA = 1\n").hash != a.hash


# -- Candidate static analysis -----------------------------------------------------------------


def test_analyze_finds_triton_kernels_in_cases(case):
    facts = analyze(case("matmul_triton").read_text())
    assert facts.syntax_error is None
    assert facts.has_model_new
    assert facts.triton_kernels == ["matmul_kernel"]
    assert facts.cuda_kernels == []


def test_analyze_decorators():
    src = textwrap.dedent('''
        import triton
        import triton.language as tl
        from triton import jit


        @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
        @triton.jit
        def tuned(x_ptr, n, BLOCK: tl.constexpr):
            pass


        @triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
        @triton.jit()
        def heur(x_ptr, n, EVEN: tl.constexpr):
            pass


        @jit
        def bare(x_ptr):
            pass


        def plain_helper(x):
            return x


        @staticmethod
        def other_decorator():
            pass


        class ModelNew:
            pass
    ''')
    facts = analyze(src)
    assert facts.has_model_new
    # A kernel under stacked decorators is one kernel.
    assert facts.triton_kernels == ["tuned", "heur", "bare"]
    lines = {k.name: k.line for k in facts.kernels}
    assert src.splitlines()[lines["tuned"] - 1].startswith("def tuned")


def test_analyze_load_inline_functions():
    src = textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        import torch.utils.cpp_extension as ext

        mod = load_inline(name="my_ext", cpp_sources="", cuda_sources="", functions=["f", "g"])
        one = ext.load_inline(name="other", cpp_sources="", functions="h")
        unnamed = load_inline(name="by_name", cpp_sources="")


        class ModelNew:
            pass
    ''')
    facts = analyze(src)
    assert facts.cuda_kernels == ["f", "g", "h", "by_name"]
    assert facts.triton_kernels == []


def test_analyze_syntax_error(case):
    facts = analyze(case("fault_syntax_error").read_text())
    assert facts.syntax_error is not None
    assert facts.syntax_error.startswith("SyntaxError: ")
    assert "line 8" in facts.syntax_error
    assert not facts.has_model_new and facts.kernels == ()


def test_analyze_no_model_new(case):
    facts = analyze(case("no_model_new").read_text())
    assert facts.syntax_error is None
    assert not facts.has_model_new
    assert facts.triton_kernels == ["row_sum_kernel"]


def test_candidate_from_file(case):
    c = Candidate.from_file(case("rowsum_triton"))
    assert c.name == "rowsum_triton"
    assert c.hash == Candidate(c.source).hash and len(c.hash) == 16


def test_candidate_without_model_new(case):
    with pytest.raises(CandidateError, match="no class ModelNew"):
        Candidate.from_file(case("no_model_new"))


def test_candidate_with_syntax_error_is_still_a_candidate(case):
    # A syntax error is a verdict (compile_error), not a usage error.
    c = Candidate.from_file(case("fault_syntax_error"))
    assert analyze(c.source).syntax_error


def test_candidate_missing_file(tmp_path):
    with pytest.raises(CandidateError, match="candidate file not found"):
        Candidate.from_file(tmp_path / "nope.py")


def test_candidate_saved_with_a_byte_order_mark_is_not_a_compile_error(tmp_path, case):
    source = case("rowsum_triton").read_text()
    p = tmp_path / "bom.py"
    p.write_bytes(b"\xef\xbb\xbf" + source.encode("utf-8"))
    c = Candidate.from_file(p)
    assert c.source == source and analyze(c.source).syntax_error is None
