"""End-to-end verdicts on the CPU (Triton interpreter), all through one warm pool.

Honest candidates of several kinds are correct with no flags; wrong kernels are incorrect with a
useful description; a syntax error, a raise, a crash, a hang and a memory hog each get their
verdict; and the pool keeps working after all of them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import MEMORY_LIMIT, REPO, case_path

from kernelsmith.candidate import Candidate
from kernelsmith.evaluate import EvalOptions, EvalResult, Status
from kernelsmith.evaluate.sandboxing.process import descendants
from kernelsmith.task import Task

# Faults need no more than a short time limit: the hang costs exactly this long.
FAULT_OPTIONS = EvalOptions(device="cpu", timeout=12.0, memory_limit=MEMORY_LIMIT, trials=1)
# No test may wait forever on a broken pool.
RESULT_WAIT = 300.0


def _path(name_or_path) -> os.PathLike:
    return name_or_path if os.path.isabs(name_or_path) else case_path(name_or_path)


def run(pool, task, candidate, options: EvalOptions | None = None, as_text: bool = False) -> EvalResult:
    """Evaluate tests/cases/<candidate> (or an absolute path) against <task> on the pool.

    The pool takes candidate text as well as a Candidate; faults go in as text, since some
    (no ModelNew) would not even pass Candidate.from_file.
    """
    t = Task.from_file(_path(task))
    c = Path(_path(candidate)).read_text() if as_text else Candidate.from_file(_path(candidate))
    return pool.submit(t, c, options).result(timeout=RESULT_WAIT)


def fault(pool, candidate) -> EvalResult:
    return run(pool, "rowsum_task", candidate, FAULT_OPTIONS, as_text=True)


def describe(r: EvalResult) -> str:
    return f"status={r.status.value} error={r.error!r}"


HONEST = [
    pytest.param("elementwise_task", "elementwise_triton", "relu_mul_add_kernel", id="elementwise"),
    pytest.param("elementwise_bf16_task", "elementwise_bf16_triton", "relu_mul_add_bf16_kernel", id="elementwise-bf16"),
    pytest.param("rowsum_task", "rowsum_triton", "row_sum_kernel", id="reduction"),
    pytest.param("matmul_task", "matmul_triton", "matmul_kernel", id="matmul"),
    pytest.param("linear_relu_task", "linear_relu_triton", "linear_relu_kernel", id="module-with-weights"),
    pytest.param(
        REPO / "examples/softmax/task.py",
        REPO / "examples/softmax/triton_softmax.py",
        "softmax_kernel",
        id="example-softmax",
    ),
]


@pytest.mark.parametrize("task, candidate, kernel", HONEST)
def test_honest_candidate_is_correct(cpu_pool, task, candidate, kernel):
    r = run(cpu_pool, task, candidate)
    assert r.status == Status.correct, describe(r)
    assert r.correct is True
    assert r.error is None
    assert r.flags == []
    assert r.device == "cpu"
    assert r.speedup is not None and r.speedup > 0
    assert r.candidate_ms is not None and r.candidate_ms > 0
    assert r.reference_ms is not None and r.reference_ms > 0
    assert kernel in r.triton_kernels
    assert r.cuda_kernels == []
    assert len(r.trials) == cpu_pool.options.trials and all(t.ok for t in r.trials)
    # Every trial's forward launched the Triton kernel at least once.
    assert r.kernel_launches is not None and r.kernel_launches >= len(r.trials) >= 1
    assert r.timing is not None and r.timing.reps >= 1
    assert r.task_hash == Task.from_file(_path(task)).hash


# Patterns, not exact counts: on random inputs a skipped element can land within tolerance by
# chance (a row whose dropped last element is tiny; an unwritten zero where the reference is ~0).
@pytest.mark.parametrize(
    "task, candidate, details",
    [
        # every row's sum is off
        pytest.param(
            "rowsum_task",
            "rowsum_off_by_one",
            [r"\b6[0-4] of 64 elements \((100|9\d(\.\d)?)%\)", r"mismatching positions [0-3]\.\.6[0-3] of 64"],
            id="reduction-off-by-one-mask",
        ),
        # the second half of the rows was never written
        pytest.param(
            "elementwise_task",
            "elementwise_half_written",
            [
                r"\b81[5-9]\d of 16384 elements \((50|49\.\d)%\)",
                r"first mismatch at \[32, \d+\]",
                r"\(indices 32\.\.63\)",
            ],
            id="elementwise-half-written",
        ),
    ],
)
def test_wrong_kernel_is_incorrect(cpu_pool, task, candidate, details):
    r = run(cpu_pool, task, candidate)
    assert r.status == Status.incorrect, describe(r)
    assert r.correct is False
    assert r.speedup is None
    assert "out of tolerance" in r.error
    assert "worst at [" in r.error
    assert "expected" in r.error and "got" in r.error
    for detail in details:  # how many are off and where they sit
        assert re.search(detail, r.error), (detail, r.error)
    assert r.trials and not r.trials[-1].ok and r.trials[-1].message
    assert "ModelNew's weights" not in r.error  # these tasks' Models hold no parameters


def test_weights_built_in_another_order_get_a_hint(cpu_pool):
    """Issue 29: ModelNew creates its Linear layers in the other order than Model, so its weights
    differ; the verdict said only how many elements were off."""
    r = run(cpu_pool, "two_linear_task", "two_linear_swapped_init", FAULT_OPTIONS)
    assert r.status == Status.incorrect, describe(r)
    assert re.search(r"\b\d+ of 512 elements \((9\d|100)(\.\d+)?%\) out of tolerance", r.error), r.error
    assert r.error.endswith(
        "hint: most elements are off and the task's Model holds parameters: ModelNew's weights match Model's "
        "only when its __init__ creates the same parameters in the same order (both are built right after "
        "the same torch.manual_seed, as in KernelBench)"
    ), r.error
    assert r.trials[-1].message and "ModelNew's weights" in r.trials[-1].message


def test_syntax_error_is_compile_error(cpu_pool):
    r = fault(cpu_pool, "fault_syntax_error")
    assert r.status == Status.compile_error, describe(r)
    assert r.correct is False
    assert "SyntaxError" in r.error
    assert "line 8" in r.error


def test_raise_in_forward_is_runtime_error(cpu_pool):
    r = fault(cpu_pool, "fault_raises")
    assert r.status == Status.runtime_error, describe(r)
    assert "ValueError: kernelsmith-test: deliberate failure in forward" in r.error
    # The sandbox's scratch directory is not part of the feedback.
    assert "ks-cand-" not in r.error
    # the candidate's own frame comes first: none of the evaluator's (or torch's module call) above it
    files = re.findall(r'File "([^"]+)"', r.error)
    assert files and files[0] == "candidate.py", r.error
    # the trial is recorded as failed, without output (issue 29: it was left out of trials)
    assert [(t.ok, t.answered) for t in r.trials] == [(False, False)] and r.trials[0].message == r.error


def _elementwise_variant(old: str, new: str) -> str:
    code = case_path("elementwise_triton").read_text()
    assert old in code
    return code.replace(old, new, 1)


@pytest.mark.parametrize(
    "ret, got",
    [
        ("(out,)", "a tuple of 1 (a tensor)"),
        ("[out]", "a list of 1 (a tensor)"),
        ("(out, out)", "a tuple of 2 (a tensor, a tensor)"),
        ('{"out": out}', "a dict"),
    ],
)
def test_output_structure_is_part_of_correctness(cpu_pool, tmp_path, ret, got):
    """The reference returns a tensor: a tuple, list or dict around the right values is wrong,
    and the verdict says what is wrong with the output (not the evaluator's traceback)."""
    path = tmp_path / "candidate.py"
    path.write_text(_elementwise_variant("        return out\n", f"        return {ret}\n"))
    r = run(cpu_pool, "elementwise_task", path, FAULT_OPTIONS, as_text=True)
    assert r.status == Status.incorrect, describe(r)
    assert f"forward returned {got} where the reference returns a tensor" in r.error, r.error
    assert "Traceback" not in r.error


@pytest.mark.parametrize(
    "init, needle",
    [
        (
            '        super().__init__()\n        raise ValueError("kernelsmith-test: bad init")\n',
            "ValueError: kernelsmith-test: bad init",
        ),
        ("        super().__init__()\n        self.scale = {}['missing']\n", "KeyError: 'missing'"),
    ],
)
def test_init_that_raises_is_runtime_error_in_the_load_stage(cpu_pool, tmp_path, init, needle):
    path = tmp_path / "candidate.py"
    path.write_text(_elementwise_variant("        super().__init__()\n", init))
    r = run(cpu_pool, "elementwise_task", path, FAULT_OPTIONS, as_text=True)
    assert r.status == Status.runtime_error, describe(r)
    assert r.error.startswith("building the model failed: ModelNew(*get_init_inputs()) raised"), r.error
    assert needle in r.error
    files = re.findall(r'File "([^"]+)"', r.error)
    assert files and files[0] == "candidate.py", r.error  # the candidate's __init__, not runtime.py


def test_init_with_other_arguments_is_runtime_error_in_the_load_stage(cpu_pool, tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text(_elementwise_variant("    def __init__(self):\n", "    def __init__(self, hidden, scale):\n"))
    r = run(cpu_pool, "elementwise_task", path, FAULT_OPTIONS, as_text=True)
    assert r.status == Status.runtime_error, describe(r)
    assert r.error.startswith("building the model failed"), r.error
    assert "missing 2 required positional arguments: 'hidden' and 'scale'" in r.error
    assert "kernelsmith/evaluate" not in r.error  # no frame of the evaluator's own


def test_segfault_is_runtime_error(cpu_pool):
    r = fault(cpu_pool, "fault_segfault")
    assert r.status == Status.runtime_error, describe(r)
    assert "SIGSEGV" in r.error


def test_hang_is_timeout(cpu_pool):
    r = fault(cpu_pool, "fault_hang")
    assert r.status == Status.timeout, describe(r)
    assert r.correct is False
    assert "time limit" in r.error
    # the time limit counts from the sandbox's start, not from the wait for one
    assert r.stages.total - r.stages.worker_wait < FAULT_OPTIONS.timeout + 10
    # issue 29: the trial that hung is recorded, and the correctness stage holds its seconds
    assert [(t.ok, t.answered) for t in r.trials] == [(False, False)] and "time limit" in (r.trials[0].message or "")
    assert r.stages.correctness > FAULT_OPTIONS.timeout - r.stages.load - 1, r.stages


def test_memory_hog_is_runtime_error(cpu_pool):
    r = fault(cpu_pool, "fault_memory_hog")
    assert r.status == Status.runtime_error, describe(r)
    assert "memory limit" in r.error
    # Stopped near the limit, long before its 4 GiB or the time limit.
    assert r.stages.total - r.stages.worker_wait < FAULT_OPTIONS.timeout


def test_no_model_new_is_rejected(cpu_pool):
    r = fault(cpu_pool, "no_model_new")
    assert r.status == Status.rejected, describe(r)
    assert "ModelNew" in r.error


def _sandboxes() -> list[int]:
    """Live sandboxes of the judges below this test process (the judge's warm spare among them).

    A sandbox is counted once, as the judge's direct child: under bubblewrap that child is the
    wrapper, with bwrap's init and the Python process below it. Grandchildren are not counted:
    a killed one may still be exiting when the verdict arrives, and re-parents to the judge.
    """

    def read(pid: int) -> tuple[bytes, int, bytes] | None:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return cmd, int(fields[1]), fields[0]

    procs = {pid: info for pid in descendants(os.getpid()) if (info := read(pid))}
    judges = {pid for pid, (cmd, _, _) in procs.items() if b"kernelsmith.evaluate.judging.worker" in cmd}
    return [
        pid
        for pid, (cmd, ppid, state) in procs.items()
        if ppid in judges and b"kernelsmith.evaluate.runner.sandbox" in cmd and state != b"Z"
    ]


def test_pool_keeps_working_after_faults(cpu_pool, cache_dir):
    # Runs after the faults above in file order; the crash here makes it stand alone too.
    crashed = fault(cpu_pool, "fault_segfault")
    assert crashed.status == Status.runtime_error, describe(crashed)
    r = run(cpu_pool, "rowsum_task", "rowsum_triton")
    assert r.status == Status.correct, describe(r)
    assert r.kernel_launches and r.kernel_launches >= 1
    # The reference was timed for this task already (at the latest during the crash's run).
    assert r.baseline_cached
    assert (cache_dir / "baselines.sqlite").is_file()
    # Nothing left behind by the hang, the hog or the crash: at most the judge's warm spare.
    assert len(_sandboxes()) <= 1


def test_the_verdict_names_its_timing_method_and_carries_both_figures(cpu_pool):
    """Issue 28, on the CPU: which time `speedup` compares, how it was measured, and the eager call
    time beside it with its own speedup (both relative only here)."""
    r = run(cpu_pool, "elementwise_task", "elementwise_triton")
    assert r.success, describe(r)
    assert (r.speedup_basis, r.timing_method, r.timing_fallback) == ("cpu_wall", "cpu_wall", None)
    assert r.timing and r.timing.method == "cpu_wall"
    assert r.eager_timing and r.eager_timing.method == "cpu_eager" and r.eager_timing.calls >= 2
    assert r.reference_timing and r.reference_timing.method == "cpu_wall"
    assert r.reference_eager_timing and r.reference_eager_timing.method == "cpu_eager"
    assert r.eager_ms and r.reference_eager_ms
    assert r.eager_speedup == pytest.approx(r.reference_eager_ms / r.eager_ms)
    assert r.judge_timing and r.judge_timing.regime == "eager"
    # The timing stage split into its parts (issue 56), in order, adding up to the stage's time.
    parts = r.stages.timing_parts
    assert list(parts) == ["sandbox", "check", "harness", "batches", "verify"], parts
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(r.stages.timing, abs=0.01)


def test_no_cache_neither_reads_nor_writes_the_baseline_cache(cpu_pool, cache_dir):
    """`--no-cache`: the cache file (and its WAL) stay byte-identical; the judge's own figures for the
    task, measured for the first verdict, are reused (tests/evaluate/test_baselines_cpu.py)."""
    first = run(cpu_pool, "elementwise_task", "elementwise_triton")
    assert first.success, describe(first)
    files = sorted(cache_dir.glob("baselines.sqlite*"))
    before = {p.name: p.read_bytes() for p in files}
    opts = cpu_pool.options.model_copy(update={"use_baseline_cache": False})
    r = run(cpu_pool, "elementwise_task", "elementwise_triton", opts)
    assert r.success and r.baseline_cached and r.baseline_source != "measured", describe(r)
    assert r.reference_timing == first.reference_timing
    assert {p.name: p.read_bytes() for p in sorted(cache_dir.glob("baselines.sqlite*"))} == before


def test_a_pure_triton_kernel_is_a_success_under_torch_ops_none(cpu_pool):
    """The harness's own ops (checksum weights, refills) are not the candidate's (issue 29 item 1)."""
    opts = cpu_pool.options.model_copy(update={"torch_ops": "none"})
    r = run(cpu_pool, REPO / "examples/softmax/task.py", REPO / "examples/softmax/triton_softmax.py", opts)
    assert r.success, f"{describe(r)} flags={r.flag_details}"


def test_a_fused_kernel_that_rounds_once_is_correct_by_the_precision_rule(cpu_pool):
    """Issue 41: at bf16 the eager reference rounds after every op and drifts (here 44% of elements
    beyond the flat 1e-2 of a kernel that rounds once); against a float64 run of the same Model the
    fused kernel is closer than eager is, so it is correct, and its trials say why."""
    r = run(cpu_pool, "precision_bf16_task", "precision_fused_triton")
    assert r.success, describe(r)
    assert any("float64 run of the reference" in (t.message or "") for t in r.trials), r.trials


def test_low_precision_on_purpose_is_still_incorrect(cpu_pool):
    """A cheat aimed at the precision rule: a float32 task computed from bf16-rounded inputs; its error
    against float64 is thousands of times eager float32's own."""
    r = run(cpu_pool, "precision_fp32_task", "precision_low_on_purpose")
    assert r.status == Status.incorrect, describe(r)
    assert "more than 4x" in (r.error or ""), r.error


def test_the_reference_and_the_candidate_run_at_the_evaluations_precision(cpu_pool):
    """Issue 47: one set of float32 precision flags (runtime.PRECISION, TF32 off) for the judge's reference
    and the sandbox. The task adds a number spelled by the flags in the judge's process; the candidate adds
    the one PRECISION spells and raises if its own process's flags differ: correct only when both ran under
    PRECISION (the seed step compiles under them too: tests/unit/test_seed_trace.py)."""
    r = run(cpu_pool, "precision_flags_task", "precision_flags_triton")
    assert r.success, describe(r)
