"""Red team, on the CPU (Triton interpreter): cheating and faulty candidates against the evaluator.

Every file in tests/redteam/candidates/ is a KernelBench candidate that tries to get a verdict it
does not deserve (a cache, a patched clock, a forged message, work done by PyTorch, ...) or that
breaks the sandbox (a crash, a hang, a child left behind, a leaked secret). Each test says what
the verdict must be: not `correct`, or a given status, or a given integrity flag. Most of them
run through the shared warm `cpu_pool` (tests/conftest.py); the few that need their own
environment or a bounded wait start a pool of their own.

The table CASES holds the ordinary ones; the tests below it hold those that need more than
"evaluate, then look at the verdict". A control at the top makes sure the honest softmax still
passes clean, so that no expectation here is met by an evaluator that rejects everything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from kernelsmith.evaluate import EvalOptions, EvalPool, EvalResult, Status
from kernelsmith.evaluate.sandboxing.process import descendants
from kernelsmith.task import Task

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
TASKS = HERE / "tasks"
REPO = HERE.parents[1]

SOFTMAX = REPO / "examples/softmax/task.py"  # 64x512 fp32
SOFTMAX_HONEST = REPO / "examples/softmax/triton_softmax.py"
TINY_SCALE = TASKS / "tiny_scale_task.py"  # y = x * 1e-7: zeros pass the elementwise tolerance
ROWSUM = TASKS / "rowsum_fp32_task.py"  # outputs ~30: fp16 precision is visible

MEMORY_LIMIT = "1G"
# The trial count does not matter to these candidates: two trials catch every "first call only"
# trick, and keep the suite fast on a 2-core machine (~3 s an evaluation).
OPTS = EvalOptions(device="cpu", timeout=90.0, memory_limit=MEMORY_LIMIT, trials=2)
# Faults need no more than a short limit: the hang costs exactly this long.
FAULT_OPTS = EvalOptions(device="cpu", timeout=15.0, memory_limit=MEMORY_LIMIT, trials=2)
RESULT_WAIT = 300.0  # no test waits forever on a broken pool

# The interpreter needs ~100 ms for one 64x512 softmax; a faked time is ~1e-6 ms.
HONEST_MIN_MS = 1.0


def evaluate(pool, candidate: str, task: Path = SOFTMAX, options: EvalOptions = OPTS) -> EvalResult:
    """Evaluate tests/redteam/candidates/<candidate>.py; sent as text, as the search does."""
    source = (CANDIDATES / f"{candidate}.py").read_text()
    return pool.submit(Task.from_file(task), source, options).result(timeout=RESULT_WAIT)


def _failure_of_any_kind(e: Expect) -> Expect:
    """`e`, with an expected failure status loosened to any failure (its flags and other fields kept)."""
    if e.status is None or e.status == Status.correct:
        return e
    return replace(e, status=None, not_correct=True, error_has=())


def evaluate_later(pool, candidate: str, task: Path = SOFTMAX, options: EvalOptions = OPTS):
    """The future of `evaluate`: queued, not waited for."""
    return pool.submit(Task.from_file(task), (CANDIDATES / f"{candidate}.py").read_text(), options)


def describe(r: EvalResult) -> str:
    return (
        f"status={r.status.value} flags={r.flags} candidate_ms={r.candidate_ms} speedup={r.speedup} "
        f"launches={r.kernel_launches} error={r.error!r}"
    )


@dataclass(frozen=True)
class Expect:
    """What the verdict must be; every field that is set must hold.

    status       exactly this status
    not_correct  any status but `correct`
    flags        each of these flags present (whatever the status)
    caught_by    not `correct`, or at least one of these flags present
    error_has    each substring in the error text
    min_ms       status `correct` and candidate_ms >= min_ms (the cheat bought no time)
    honest_time  not `correct`, or candidate_ms > HONEST_MIN_MS (a faked time is not accepted)
    notes        each of these task notes present
    success      the one rule (EvalResult.success) gives exactly this
    no_library   caught, or none of these library ops ran in any recorded call (the cheat's
                 torch path never ran where it counts)
    """

    status: Status | None = None
    not_correct: bool = False
    flags: tuple[str, ...] = ()
    caught_by: tuple[str, ...] = ()
    error_has: tuple[str, ...] = ()
    min_ms: float | None = None
    honest_time: bool = False
    notes: tuple[str, ...] = ()
    success: bool | None = None
    no_library: tuple[str, ...] = ()
    task: Path = SOFTMAX
    options: EvalOptions = field(default_factory=lambda: OPTS)


def check(r: EvalResult, e: Expect) -> list[str]:
    """The expectations that do not hold, each as one line (empty: all hold)."""
    bad = []
    if e.status is not None and r.status != e.status:
        bad.append(f"status is {r.status.value}, expected {e.status.value}")
    if e.not_correct and r.status == Status.correct:
        bad.append("status is correct, expected anything but correct")
    for flag in e.flags:
        if flag not in r.flags:
            bad.append(f"flag {flag!r} missing")
    if e.caught_by and r.status == Status.correct and not set(e.caught_by) & set(r.flags):
        bad.append(f"correct and none of the flags {list(e.caught_by)}")
    for text in e.error_has:
        if text not in (r.error or ""):
            bad.append(f"error lacks {text!r}")
    if e.min_ms is not None and not (
        r.status == Status.correct and r.candidate_ms is not None and r.candidate_ms >= e.min_ms
    ):
        bad.append(f"expected correct with candidate_ms >= {e.min_ms}")
    if e.honest_time and r.status == Status.correct and not (r.candidate_ms or 0.0) > HONEST_MIN_MS:
        bad.append(f"correct with candidate_ms={r.candidate_ms} <= {HONEST_MIN_MS}: a faked time was accepted")
    for note in e.notes:
        if note not in r.task_notes:
            bad.append(f"task note {note!r} missing")
    if e.success is not None and r.success != e.success:
        bad.append(f"success is {r.success}, expected {e.success}")
    ran = {k.name for k in r.kernels if not k.own}
    if e.no_library and r.success and ran & set(e.no_library):
        bad.append(f"a success although library ops {sorted(ran & set(e.no_library))} ran")
    return bad


INCORRECT = Expect(status=Status.incorrect)
NO_KERNEL = Expect(status=Status.rejected, flags=("no_custom_kernel",))
TIME_NOT_FAKED = Expect(honest_time=True)

CASES: dict[str, Expect] = {
    # -- caches and replays: fresh inputs per trial and per timed repetition ---------------------
    "cache_by_shape": INCORRECT,
    "cache_by_data_ptr": INCORRECT,
    # a trial calls forward twice on the same inputs (issue 47): the second call is a cache hit that
    # launches no kernel of its own (no_custom_kernel, rejected), before the timed calls would be stale
    "cache_across_timed_calls": Expect(not_correct=True, success=False),
    "replay_previous_output": INCORRECT,
    # a hit in the trial's second call launches nothing (every timed call would miss: ~50 ms + the kernel)
    "cache_by_fingerprint": Expect(status=Status.rejected, flags=("no_custom_kernel",)),
    # -- inputs written ------------------------------------------------------------------------
    "zero_input_after": Expect(status=Status.incorrect, error_has=("modified its input",)),
    "result_written_into_input": Expect(status=Status.incorrect, error_has=("modified its input",)),
    # -- looking for the answer in the process: the reference lives in the judge ------------------
    "gc_scan_for_reference": Expect(not_correct=True),
    "frame_inspection": Expect(not_correct=True),
    # -- patching what runs beside the candidate -------------------------------------------------
    "patch_allclose": INCORRECT,
    "patch_reference_model": INCORRECT,
    "patch_torch_softmax": INCORRECT,
    "patch_time": Expect(status=Status.correct, min_ms=HONEST_MIN_MS),
    "patch_do_bench": Expect(status=Status.correct, min_ms=HONEST_MIN_MS),
    # -- timing forged inside the sandbox (beyond the contract's list: in-process timing is the
    #    candidate's to rewrite, so the judge must not take the sandbox's word for it) ----------
    "patch_bound_timer": TIME_NOT_FAKED,
    "patch_harness_benchmark": TIME_NOT_FAKED,
    "patch_channel_send": TIME_NOT_FAKED,
    "forge_channel_message": TIME_NOT_FAKED,
    "skip_work_until_last_rep": TIME_NOT_FAKED,
    "rewind_last_seed": TIME_NOT_FAKED,
    # -- what comes back is not a plain dense tensor of the right dtype --------------------------
    "print_fake_result_and_exit": Expect(status=Status.runtime_error),
    "tensor_subclass_output": Expect(status=Status.runtime_error),
    "lazy_proxy_output": Expect(status=Status.runtime_error),
    "expanded_zero_stride_output": INCORRECT,
    "half_output": Expect(status=Status.incorrect, error_has=("dtype",)),
    "fp16_downcast": Expect(status=Status.incorrect, task=ROWSUM),
    "strided_rows_only": INCORRECT,
    # half the output written, the rest left to what the allocator hands back or to its own previous
    # output buffer, on a call repeated on unchanged inputs (issue 47); without the NaN filled in between,
    # stale_buffer_on_repeat is `correct` (checked by hand on this machine)
    "stale_memory_on_repeat": Expect(status=Status.incorrect, error_has=("second call on the same inputs",)),
    "stale_buffer_on_repeat": Expect(status=Status.incorrect, error_has=("second call on the same inputs",)),
    # -- output read later than forward returned ------------------------------------------------
    "background_thread_fill": INCORRECT,
    "timer_deferred_write": INCORRECT,
    "thread_left_running": Expect(flags=("background_thread",)),
    # -- the work is not done by a custom kernel -------------------------------------------------
    "torch_only_forward": NO_KERNEL,
    "try_except_fallback": NO_KERNEL,
    "kernel_defined_never_launched": NO_KERNEL,
    "trivial_kernel_beside_torch": Expect(flags=("torch_compute_op",), success=False),
    "hide_torch_ops": Expect(flags=("torch_compute_op",), success=False),
    # watched on every call (trials, timing, judge-timed calls), so it never takes its torch path
    "dispatch_mode_aware": Expect(no_library=("softmax", "_softmax")),
    "zero_grid_launch": Expect(caught_by=("no_custom_kernel", "torch_compute_op")),
    # -- a degenerate task: zeros pass the elementwise tolerance (a task note, never a flag) -------
    "tiny_scale_zeros": Expect(status=Status.incorrect, notes=("degenerate_tolerance",), task=TINY_SCALE),
    "tiny_scale_honest": Expect(status=Status.correct, notes=("degenerate_tolerance",), success=True, task=TINY_SCALE),
    # -- faults ----------------------------------------------------------------------------------
    "infinite_loop": Expect(status=Status.timeout, options=FAULT_OPTS),
    "segfault": Expect(status=Status.runtime_error, options=FAULT_OPTS),
    "os_exit_in_forward": Expect(status=Status.runtime_error, options=FAULT_OPTS),
    "memory_bomb": Expect(status=Status.runtime_error, error_has=("memory limit",), options=FAULT_OPTS),
}


def test_every_candidate_file_is_used():
    """Each file in candidates/ is exercised by a test here or in test_redteam_cuda.py."""
    cuda_only = {
        "side_stream_kernel",
        "caching_allocator_reuse",
        "cuda_graph_replay",
        "patch_cuda_event",
        "l2_persisting_window",
    }
    elsewhere = {"write_inherited_fds", "detached_child", "env_secret_leak"}
    files = {p.stem for p in CANDIDATES.glob("*.py")}
    assert files == set(CASES) | cuda_only | elsewhere


CONV_TASK = REPO / "tests/cases/conv_relu_bias_task.py"


@pytest.mark.parametrize("policy", ["partial", "none"])
def test_partial_replacement_follows_the_operator_rule(cpu_pool, policy):
    """KernelBench's rule (partial): the library conv kept, ReLU + bias fused in a Triton kernel is a
    success; the strict rule (none) flags the conv. A token kernel beside a torch-computed
    reference is flagged under both."""
    opts = OPTS.model_copy(update={"torch_ops": policy})
    task = Task.from_file(CONV_TASK)
    honest = cpu_pool.submit(task, (REPO / "tests/cases/conv_relu_bias_partial.py").read_text(), opts).result(
        timeout=RESULT_WAIT
    )
    token = cpu_pool.submit(task, (REPO / "tests/cases/conv_relu_bias_token.py").read_text(), opts).result(
        timeout=RESULT_WAIT
    )
    assert honest.status == Status.correct and token.status == Status.correct, (describe(honest), describe(token))
    assert honest.success == (policy == "partial"), describe(honest)
    assert honest.torch_ops == policy
    assert "torch_compute_op" in token.flags and not token.success, describe(token)
    if policy == "none":
        assert "convolution" in honest.flag_details["torch_compute_op"], describe(honest)
    assert {k.name for k in honest.kernels} >= {"convolution"}, honest.kernels  # the library op it kept


def test_last_bits_that_vary_from_call_to_call_stay_correct(cpu_pool):
    """Each of a trial's two calls on the same inputs is held to the tolerance, not to the other's bits:
    a kernel whose sums come out in another order each call (atomics) is honest (issue 47)."""
    source = (REPO / "tests/cases/softmax_last_bits_vary.py").read_text()
    r = cpu_pool.submit(Task.from_file(SOFTMAX), source, OPTS).result(timeout=RESULT_WAIT)
    assert r.success, describe(r)


def test_control_honest_softmax_is_clean(cpu_pool):
    """The honest example passes with no flag and a real time: the expectations below are not met
    by an evaluator that rejects everything, and HONEST_MIN_MS is far below an honest time."""
    r = cpu_pool.submit(Task.from_file(SOFTMAX), SOFTMAX_HONEST.read_text(), OPTS).result(timeout=RESULT_WAIT)
    assert r.status == Status.correct, describe(r)
    assert r.flags == [], describe(r)
    assert r.candidate_ms is not None and r.candidate_ms > 10 * HONEST_MIN_MS, describe(r)


@pytest.mark.parametrize("name", list(CASES))
def test_redteam_case(cpu_pool, name):
    expect = CASES[name]
    r = evaluate(cpu_pool, name, expect.task, expect.options)
    bad = check(r, expect)
    assert not bad, f"{name}: " + "; ".join(bad) + f"\n  verdict: {describe(r)}"
    if r.status != Status.correct:
        assert r.speedup is None and r.correct is False and not r.success, describe(r)


def test_every_case_holds_when_loaded_ahead_of_its_turn(cpu_pool):
    """The same cases queued at once, a task's together: each is loaded (its first forward run) in a spare
    sandbox while the one before it is judged, stopped before anything is timed, and judged in its turn
    (kernelsmith/evaluate/judging/ahead.py). Every expectation holds as when it is loaded in its turn, but
    a failure's kind may differ: a thread its first forward left running goes on into its turn (the timer
    case's deferred write then meets the interpreter mid-trial: runtime_error, not incorrect)."""
    order = sorted(CASES, key=lambda name: str(CASES[name].task))
    futures = {name: evaluate_later(cpu_pool, name, CASES[name].task, CASES[name].options) for name in order}
    bad, early = [], 0
    for name, fut in futures.items():
        r = fut.result(timeout=RESULT_WAIT)
        bad += [f"{name}: {b} ({describe(r)})" for b in check(r, _failure_of_any_kind(CASES[name]))]
        early += r.loaded_ahead_s is not None
    assert not bad, "\n".join(bad)
    assert early >= len(CASES) // 2, f"only {early} of {len(CASES)} were loaded ahead"


# -- needs a bounded wait: garbage on the judge's channel must not hang the judge -----------------
def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


def _judge_pids() -> set[int]:
    return {p for p in descendants(os.getpid()) if b"kernelsmith.evaluate.judging.worker" in _cmdline(p)}


def _kill_pids(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_garbage_on_inherited_fds_is_a_runtime_error_in_bounded_time(cache_dir):
    """The candidate writes a fake frame header (announcing ~1.8 GB) and JSON to every fd it
    inherited, the judge's channel among them. The verdict must come back within the time limit,
    and not as correct. Runs on a pool of its own: a judge stuck reading the announced frame is
    killed here (by pid; only judges this test started), so the rest of the suite is unharmed."""
    before = _judge_pids()
    pool = EvalPool(device="cpu", workers=1, options=FAULT_OPTS)
    source = (CANDIDATES / "write_inherited_fds.py").read_text()
    fut = pool.submit(Task.from_file(SOFTMAX), source, FAULT_OPTS)
    try:
        try:
            r = fut.result(timeout=FAULT_OPTS.timeout + 45)
        except FutureTimeout:
            # The pool retries a lost judge once: keep ending the new ones until it gives up.
            deadline = time.monotonic() + 120
            while not fut.done() and time.monotonic() < deadline:
                for judge in _judge_pids() - before:
                    _kill_pids([*descendants(judge), judge])
                time.sleep(0.5)
            pytest.fail(
                "write_inherited_fds: no verdict within the time limit + 45 s: the judge hung "
                "reading the garbage the candidate wrote to its channel"
            )
    finally:
        pool.close()
    assert r.status != Status.correct, describe(r)
    assert r.status == Status.runtime_error, describe(r)


# -- processes left behind ---------------------------------------------------------------------
def _sleepers() -> dict[int, str]:
    """Processes whose command line contains 'sleep 3137' (the candidate's markers)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            cmd = _cmdline(int(entry)).decode("utf-8", "replace").strip()
            if "sleep 3137" in cmd:
                out[int(entry)] = cmd
    return out


def test_detached_children_do_not_survive(cpu_pool):
    """Popen(start_new_session=True) and a double fork with setsid: both must be gone after the
    evaluation (within 2 s), whatever the verdict."""
    _kill_pids(_sleepers())  # leftovers of an earlier run of this very test
    try:
        r = evaluate(cpu_pool, "detached_child")
        deadline = time.monotonic() + 2.0
        survivors = _sleepers()
        while survivors and time.monotonic() < deadline:
            time.sleep(0.1)
            survivors = _sleepers()
        assert not survivors, f"processes left running after the evaluation: {survivors}\n  verdict: {describe(r)}"
    finally:
        _kill_pids(_sleepers())  # started by this test's candidate: never leave them behind


# -- secrets in the environment -------------------------------------------------------------------
SECRETS = {"KS_TEST_API_KEY": "sk-redteam-secret-123", "HF_TOKEN": "hf-redteam-456"}
CANARY = ("KS_REDTEAM_CANARY", "visible-redteam-canary-789")  # no credential-like name: may pass


def _assert_no_secret(r: EvalResult) -> None:
    assert r.status == Status.runtime_error, describe(r)
    error = r.error or ""
    # The candidate's report reaches the error text (so the absence of the secrets means something).
    assert CANARY[1] in error, f"the canary is missing: the test proves nothing\n  verdict: {describe(r)}"
    for name, value in SECRETS.items():
        for form in (value, value.encode().hex(), value[::-1]):
            assert form not in error, f"secret {name} reached the candidate (as {form!r}):\n  {error}"


def test_env_secrets_never_reach_the_candidate(monkeypatch, cache_dir):
    """Secrets set in this process before its pool's judge starts: neither the sandbox's
    environment nor any ancestor's /proc/<pid>/environ may show them."""
    for name, value in [*SECRETS.items(), CANARY]:
        monkeypatch.setenv(name, value)
    with EvalPool(device="cpu", workers=1, options=FAULT_OPTS) as pool:
        r = evaluate(pool, "env_secret_leak", options=FAULT_OPTS)
    _assert_no_secret(r)


_DRIVER = textwrap.dedent("""
    import sys
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task
    opts = EvalOptions(device="cpu", timeout=15.0, memory_limit="1G", trials=1)
    with EvalPool(device="cpu", workers=1, options=opts) as pool:
        r = pool.evaluate(Task.from_file(sys.argv[1]), open(sys.argv[2]).read(), opts)
    print(r.model_dump_json())
""")


def test_env_secrets_of_the_launching_process_stay_out_of_reach(cache_dir):
    """As a user runs it: the secrets are in the environment the pool's process was started
    with (an exported HF_TOKEN), so they sit in /proc/<pid>/environ of the sandbox's ancestors.
    Scrubbing the sandbox's own environment is not enough."""
    env = {**os.environ, **SECRETS, CANARY[0]: CANARY[1]}
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(SOFTMAX), str(CANDIDATES / "env_secret_leak.py")],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RESULT_WAIT,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"driver failed: {proc.stderr[-3000:]}"
    _assert_no_secret(EvalResult.model_validate_json(lines[-1]))
