"""The `kernelsmith` command, run as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

KERNELSMITH = Path(sys.executable).parent / "kernelsmith"
SOFTMAX_TASK = REPO / "examples/softmax/task.py"
SOFTMAX_CANDIDATE = REPO / "examples/softmax/triton_softmax.py"


def ks(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    # The environment (with the session's private KERNELSMITH_CACHE_DIR) is inherited.
    return subprocess.run(
        [str(KERNELSMITH), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def assert_usage_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr  # one line, even for a long absolute path
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]


def test_installed():
    assert KERNELSMITH.is_file(), KERNELSMITH


def test_non_task_file_exits_2(case):
    p = ks("eval", case("not_a_task"), SOFTMAX_CANDIDATE, "--device", "cpu")
    assert_usage_error(p, "is not a task", "no Model and no get_inputs", "not_a_task.py")


def test_task_with_syntax_error_exits_2(case):
    p = ks("eval", case("fault_syntax_error"), SOFTMAX_CANDIDATE, "--device", "cpu")
    assert_usage_error(p, "is not a task", "syntax error at line 8")


def test_missing_task_file_exits_2(tmp_path):
    p = ks("eval", tmp_path / "missing_task.py", SOFTMAX_CANDIDATE, "--device", "cpu")
    assert_usage_error(p, "task file not found", "missing_task.py")


def test_missing_candidate_file_exits_2(tmp_path):
    p = ks("eval", SOFTMAX_TASK, tmp_path / "missing_candidate.py", "--device", "cpu")
    assert_usage_error(p, "candidate file not found", "missing_candidate.py")


def test_candidate_without_model_new_exits_2(case):
    p = ks("eval", SOFTMAX_TASK, case("no_model_new"), "--device", "cpu")
    assert_usage_error(p, "is not a candidate", "no class ModelNew")


def test_bad_memory_limit_exits_2():
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--memory-limit", "lots")
    assert_usage_error(p, "bad size")


def test_bad_timeout_exits_2():
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--timeout", "-1")
    assert_usage_error(p, "--timeout", "greater than 0")


def test_cuda_without_gpu_exits_2():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cuda")
    assert_usage_error(p, "no CUDA GPU")


def test_eval_json_softmax():
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    result = json.loads(p.stdout.strip().splitlines()[-1])
    for key in ("status", "correct", "speedup", "speedup_vs_compile", "candidate_ms", "reference_ms", "flags", "error"):
        assert key in result, key
    assert result["status"] == "correct", result.get("error")
    assert result["correct"] is True
    assert result["flags"] == [] and result["error"] is None
    assert result["speedup"] > 0 and result["candidate_ms"] > 0 and result["reference_ms"] > 0
    assert result["speedup_vs_compile"] is None  # no torch.compile baseline on the CPU by default
    assert result["device"] == "cpu"
    assert result["triton_kernels"] == ["softmax_kernel"]
    assert len(result["trials"]) == 5 and all(t["ok"] for t in result["trials"])


def test_eval_small_reads_the_task_as_evolve_and_bench_do():
    # --small goes through task_sizes.load_task (tests/test_suite_tasks.py: the cut itself); a
    # task without CPU_SIZES is refused before anything is evaluated.
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--small", timeout=60)
    assert_usage_error(p, f"{SOFTMAX_TASK} declares no CPU_SIZES, so --small cannot shrink it")


def test_task_whose_get_inputs_raises_is_a_task_error(tmp_path, case):
    task = tmp_path / "broken_task.py"
    task.write_text(
        case("rowsum_task")
        .read_text()
        .replace("    return [torch.randn(M, N)]", '    raise RuntimeError("task bug in get_inputs")')
    )
    p = ks("eval", task, case("rowsum_triton"), "--device", "cpu", "--trials", "1", timeout=120)
    assert_usage_error(p, "task bug in get_inputs")


def test_bench_html_to_a_directory_and_a_page_that_cannot_be_written(tmp_path):
    suite, solutions, pages = tmp_path / "suite", tmp_path / "solutions", tmp_path / "pages"
    for d in (suite, solutions, pages):
        d.mkdir()
    shutil.copy(REPO / "examples/suite/row_sum.py", suite)  # no solution: reported missing, nothing evaluated
    p = ks("bench", suite, "--solutions", solutions, "--device", "cpu", "--quiet", "--html", pages, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr + p.stdout, (p.stdout[-2000:], p.stderr[-3000:])
    assert 'id="suite-chart"' in (pages / "suite_report.html").read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pages", "solutions", "suite"]  # no pages.tmp
    # a page that cannot be written: the results are printed first, then one line and exit 2
    (tmp_path / "a_file").write_text("x")
    p = ks(
        "bench",
        suite,
        "--solutions",
        solutions,
        "--device",
        "cpu",
        "--json",
        "--html",
        tmp_path / "a_file" / "bench.html",
        timeout=120,
    )
    assert_usage_error(p, "cannot write", "a_file is not a directory")
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["tasks"] == 1 and report["rows"][0]["status"] == "missing"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a_file", "pages", "solutions", "suite"]


def test_eval_profile_on_the_cpu_says_why_there_are_no_counters():
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--profile", "--json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["status"] == "correct" and result["counters"]["status"] == "unsupported"
    assert "need a CUDA GPU and Nsight Compute" in result["counters"]["message"]
    table = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--profile")
    assert table.returncode == 0 and "none (unsupported)" in table.stdout, table.stdout
    plain = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--json")
    assert json.loads(plain.stdout.strip().splitlines()[-1])["counters"] is None  # only on request
