"""The `kernelsmith` command, run as a user would."""

from __future__ import annotations

import json
import os
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


def ks_here(*args) -> subprocess.CompletedProcess:
    """`kernelsmith ARGS` in this process, through the app's own commands (typer's runner), as `ks` returns it:
    for an error the command says before any worker starts, where a process of its own adds only its start.
    What only a process shows (the entry point, main()'s usage errors) stays with `ks`."""
    from typer.testing import CliRunner

    from kernelsmith.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


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


def test_package_metadata_has_no_deprecated_form():
    """Issue 29, item 10: installing warned that `project.license` as a TOML table is deprecated."""
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # setuptools' deprecations are warnings: each one fails here
        dist = apply_configuration(Distribution(), REPO / "pyproject.toml")
    assert dist.metadata.license_expression == "Apache-2.0"


def test_python_dash_m_and_version():
    """Issue 29, item 10: `python -m kernelsmith` did not run, and --help showed `--version <bool>`."""
    from kernelsmith import __version__

    p = subprocess.run([sys.executable, "-m", "kernelsmith", "--version"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and p.stdout == f"kernelsmith {__version__}\n", (p.stdout, p.stderr)
    usage = subprocess.run([sys.executable, "-m", "kernelsmith", "eval"], capture_output=True, text=True, cwd=REPO)
    assert_usage_error(usage, "Missing argument 'task'", "kernelsmith eval --help")  # prog name: kernelsmith
    line = next(x for x in ks("--help").stdout.splitlines() if "--version" in x)
    assert "print the version and exit" in line and "<bool>" not in line, line


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


def test_doctor_cuda_without_gpu_is_one_line():
    """Issue 29, item 4: it started a CUDA sandbox anyway and printed the sandbox's traceback."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU visible, on any machine
    p = subprocess.run(
        [str(KERNELSMITH), "doctor", "--device", "cuda"], capture_output=True, text=True, timeout=120, cwd=REPO, env=env
    )
    assert_usage_error(p, "--device cuda: no CUDA GPU is visible here; use --device cpu")


def test_the_no_gpu_sentence_is_written_once():
    """Issue 29: doctor repeated EvalPool's sentence as a string of its own; both use one constant."""
    from kernelsmith.device import NO_CUDA_GPU

    assert NO_CUDA_GPU == "--device cuda: no CUDA GPU is visible here; use --device cpu"
    holders = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "kernelsmith").rglob("*.py")
        if "no CUDA GPU is visible here" in p.read_text()
    )
    assert holders == ["kernelsmith/device.py"], holders


def test_eval_json_softmax():
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--json")
    assert p.returncode == 0, (p.stdout, p.stderr)
    result = json.loads(p.stdout.strip().splitlines()[-1])
    for key in ("status", "correct", "success", "speedup", "speedup_vs_compile", "candidate_ms", "reference_ms"):
        assert key in result, key
    assert result["status"] == "correct", result.get("error")
    assert result["correct"] is True and result["success"] is True
    assert result["flags"] == [] and result["error"] is None
    assert result["speedup"] > 0 and result["candidate_ms"] > 0 and result["reference_ms"] > 0
    assert result["speedup_vs_compile"] is None  # no torch.compile baseline on the CPU by default
    assert result["device"] == "cpu"
    assert result["triton_kernels"] == ["softmax_kernel"]
    assert len(result["trials"]) == 5 and all(t["ok"] for t in result["trials"])


def test_eval_small_reads_the_task_as_evolve_and_bench_do():
    # --small goes through task_sizes.load_task (tests/suite/test_suite_tasks.py: the cut itself); a
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


def test_piped_tables_keep_long_paths_whole(tmp_path):
    """Issue 29, item 8: with stdout to a pipe or a file, rich cut tables to 80 columns, and paths
    and numbers were lost in logs (`bench ... > log`)."""
    rel = "level1/a_folder_name_long_enough_to_overflow_eighty_columns/row_sum_with_a_long_name.py"
    suite, solutions = tmp_path / "suite", tmp_path / "solutions"
    (suite / rel).parent.mkdir(parents=True)
    solutions.mkdir()
    shutil.copy(REPO / "examples/suite/row_sum.py", suite / rel)  # no solution: reported missing, nothing evaluated
    p = ks("bench", suite, "--solutions", solutions, "--device", "cpu", "--quiet", timeout=120)  # stdout: a pipe
    assert p.returncode == 0, p.stderr[-2000:]
    row = next(line for line in p.stdout.splitlines() if "missing" in line)
    assert rel in row and f"no solution file at {solutions / rel}" in row, p.stdout


def test_a_terminal_keeps_its_width(monkeypatch):
    import io
    import pty

    from kernelsmith.cli.common import UNBOUNDED_WIDTH, stdout_console

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert stdout_console().width == UNBOUNDED_WIDTH  # not a terminal
    main, tty = pty.openpty()
    with open(tty, "w") as terminal:
        monkeypatch.setattr(sys, "stdout", terminal)
        assert stdout_console().width < UNBOUNDED_WIDTH  # the window's width (rich: 80 when unknown)
    os.close(main)


def _table_text(table) -> str:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_a_cpu_speedup_says_it_is_relative_only():
    """Issue 29, item 10: a CPU verdict's 0.0005x read as the kernel's speedup, with no word that
    it times the Triton interpreter against CPU torch."""
    from kernelsmith.cli.eval_record import verdict_table
    from kernelsmith.evaluate.result import EvalResult

    fields = dict(status="correct", correct=True, speedup=0.000533, speedup_vs_compile=0.0004)
    cpu = _table_text(verdict_table(EvalResult(device="cpu", **fields), "task", "cand"))
    for row in ("speedup vs reference", "speedup vs torch.compile"):
        line = next(x for x in cpu.splitlines() if row in x)
        assert "CPU figure (Triton runs interpreted there): relative only, not a GPU speedup" in line, line
    gpu = _table_text(verdict_table(EvalResult(device="cuda", gpu_name="H200", **fields), "task", "cand"))
    assert "0.000533x" in gpu and "not a GPU speedup" not in gpu


def test_the_trials_row_names_a_trial_without_output_and_a_nan_max_error():
    """Issue 29: a timeout in trial 2 read 'trials 1/1 passed'; a NaN output's max abs err was left out."""
    from kernelsmith.cli.eval_record import trials_text
    from kernelsmith.evaluate.result import TrialReport

    ok = TrialReport(seed=1, ok=True, max_abs_err=2e-6)
    timed_out = TrialReport(seed=2, ok=False, answered=False, message="no answer during correctness trial 2")
    assert trials_text([ok, ok]) == "2/2 passed, max abs err 2e-06"
    assert trials_text([ok, timed_out]) == "1/2 passed, max abs err 2e-06; trial 2 sent no output (see the error)"
    assert trials_text([timed_out]) == "0/1 passed; trial 1 sent no output (see the error)"
    nan = TrialReport(seed=3, ok=False, max_abs_err=float("nan"))
    assert trials_text([ok, nan]) == "1/2 passed, max abs err nan"


def test_profile_of_a_verdict_that_is_not_a_success_says_why_there_are_no_counters():
    """Issue 29, item 10: `eval --profile` profiles only a success, so a CPU verdict that was not one
    had no counters row at all; the table now says why."""
    from kernelsmith.cli.eval_record import verdict_table
    from kernelsmith.evaluate.result import EvalResult

    def counters_row(result: EvalResult, profiled: bool = True) -> str | None:
        text = _table_text(verdict_table(result, "task", "cand", profiled))
        return next((x for x in text.splitlines() if "counters" in x), None)

    incorrect = EvalResult(status="incorrect", correct=False, device="cpu")
    row = counters_row(incorrect)
    assert row is not None and "none: only a success is profiled, and this verdict is not one" in row, row
    assert "hardware counters need a CUDA GPU and Nsight Compute" in row
    flagged = EvalResult(status="correct", correct=True, flags=["torch_compute_op"], device="cuda", gpu_name="H200")
    row = counters_row(flagged)
    assert row is not None and "only a success is profiled" in row and "CUDA GPU" not in row, row
    assert counters_row(incorrect, profiled=False) is None  # without --profile, no word of it


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


def test_cache_lists_and_clears_baselines(tmp_path, monkeypatch):
    """Issue 28: no command listed or cleared the baseline cache, so a bad figure stayed for good."""
    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache
    from kernelsmith.evaluate.result import TimingStats

    monkeypatch.setenv("KERNELSMITH_CACHE_DIR", str(tmp_path))
    assert ks("cache", "list").returncode == 0  # no file yet: an empty list, and no file made
    assert not (tmp_path / "baselines.sqlite").exists()
    cache = BaselineCache()
    ref = TimingStats.from_samples([0.0123, 0.0124], method="cuda_graph", calls=200)
    for task, gpu in (("aaaa1111", "NVIDIA H200"), ("bbbb2222", "NVIDIA H200"), ("aaaa1111", "NVIDIA H100")):
        cache.put(f"{gpu}|2.11|{task}|v3", gpu, "2.11", task, {"reference": ref, "compile": None})
    rows = [json.loads(line) for line in ks("cache", "list", "--json").stdout.splitlines()]
    assert len(rows) == 3 and {r["task_hash"] for r in rows} == {"aaaa1111", "bbbb2222"}
    assert rows[0]["reference_ms"] == pytest.approx(0.01235) and rows[0]["method"] == "cuda_graph"
    table = ks("cache", "list")
    assert table.returncode == 0 and "bbbb2222" in table.stdout and "0.01235" in table.stdout
    assert_usage_error(ks("cache", "clear"), "--task", "--all")
    assert "removed 2 entries" in ks("cache", "clear", "--task", "aaaa").stdout
    assert "removed 1 entry" in ks("cache", "clear", "--gpu", "NVIDIA H200").stdout
    assert [r for r in ks("cache", "list", "--json").stdout.splitlines()] == []
    cache.put("k", "g", "t", "cccc", {"reference": ref})
    assert "removed 1 entry" in ks("cache", "clear", "--all").stdout


def test_no_profiler_chatter_on_stderr(tmp_path):
    """Issue 40: every profiler window printed 'USDT: ... profiler_start' / 'profiler_stop' lines."""
    p = ks("eval", SOFTMAX_TASK, SOFTMAX_CANDIDATE, "--device", "cpu", "--json")
    assert p.returncode == 0, p.stderr
    assert "USDT" not in p.stderr and "profiler_start" not in p.stderr, p.stderr


CPU_SIZED_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1.0


N = 4096
CPU_SIZES = {"N": 8}


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''


def test_a_task_with_cpu_sizes_run_at_full_size_on_the_cpu_is_told_to_add_small(tmp_path, case):
    """Issue 46, item 4: the README's `eval --device cpu` without --small ran a suite task at GPU sizes,
    timed out after minutes and said nothing of the size: it says so at the start, in one line, and a
    timeout names --small."""
    task = tmp_path / "task.py"
    task.write_text(CPU_SIZED_TASK)
    p = ks("eval", task, case("fault_hang"), "--device", "cpu", "--timeout", "3", "--no-cache")
    assert p.returncode == 0, p.stderr
    note = f"note: {task} declares CPU_SIZES but runs at full size on the CPU"
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith(note) and lines[0].endswith(": add --small to cut it to its CPU_SIZES"), p.stderr
    assert "timeout" in p.stdout
    assert (
        lines[-1]
        == "note: it ran out of time at the task's full size on the CPU: add --small to cut it to its CPU_SIZES"
    )
    small = ks("eval", task, case("fault_hang"), "--device", "cpu", "--small", "--timeout", "3", "--no-cache")
    assert "note:" not in small.stderr and "timeout" in small.stdout, small.stderr


def test_a_tuner_start_that_timed_out_at_full_size_on_the_cpu_names_small_not_the_seed():
    from kernelsmith.evolve.program import Program
    from kernelsmith.evolve.start import tuner_start_failure
    from kernelsmith.task import Task

    task = Task.from_source(CPU_SIZED_TASK, name="t")
    start = Program(
        0, 0, "seed", "x", "timeout", error="no answer during correctness trial 1 before the time limit", id=1
    )
    said = tuner_start_failure(start, task, on_cpu=True)
    assert said.endswith(
        "ran out of time: no answer during correctness trial 1 before the time limit; the task declares CPU_SIZES "
        "but runs at full size on the CPU (in Triton's interpreter: up to minutes a call): add --small to cut it to its "
        "CPU_SIZES and run the command again"
    ), said
    assert "fix the seed file" not in said
    for other in (tuner_start_failure(start, task, on_cpu=False), tuner_start_failure(start, None, on_cpu=True)):
        assert other.endswith("fix the seed file and run the same command again")  # on a GPU the seed is at fault
    cut = Task.from_source(CPU_SIZED_TASK.replace("N = 4096", "N = 8"), name="t")  # --small: the sizes are cut
    assert "fix the seed file" in tuner_start_failure(start, cut, on_cpu=True)


MY_MODEL = '''import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def make():
    return MLP(), (torch.randn(32, 64),)
'''
GELU_SEED = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476)), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x0):
        x0 = x0.contiguous()
        out = torch.empty_like(x0)
        BLOCK = 256
        gelu_kernel[(triton.cdiv(x0.numel(), BLOCK),)](x0, out, x0.numel(), BLOCK=BLOCK)
        return out
'''


def test_the_walkthrough_for_a_model_of_ones_own_runs_on_the_cpu(tmp_path):
    """Issue 46, item 4: the CPU walkthrough (capture -> a seed -> tune -> apply -> load the patch; the README's
    until issue 50, now docs/capture.md's), each command as written, on a model the project never saw (fewer
    iterations)."""
    import shlex

    text = (REPO / "docs/capture.md").read_text()
    block = text[text.index("Your own model on the CPU") :].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("   #", 1)[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(c) for c in commands if c and not c.startswith("#")]
    assert [c[:2] for c in commands] == [["kernelsmith", "capture"], ["kernelsmith", "evolve"]] + [
        ["kernelsmith", "apply"],
        ["python", "-c"],
    ]
    (tmp_path / "mymodel.py").write_text(MY_MODEL)
    (tmp_path / "gelu_seed.py").write_text(GELU_SEED)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # a user's shell has none
    said = []
    for words in commands:
        program = str(KERNELSMITH) if words[0] == "kernelsmith" else sys.executable
        args = ["2" if w == "6" and words[1] == "evolve" else w for w in words[1:]]  # --iterations 2
        p = subprocess.run([program, *args], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
        assert p.returncode == 0, (words, p.stdout[-3000:], p.stderr[-3000:])
        said.append(p.stdout)
    assert "gelu.py" in said[0] and "-> check passed" in said[2], said
    assert "'gelu': Counts(fired=1" in said[3], said[3]  # the loaded patch's kernel took its region
