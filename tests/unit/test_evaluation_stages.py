"""Stages of one evaluation (kernelsmith/evaluate/judging/evaluation.py) driven by a fake judge and a fake
sandbox handle: no sandbox process, no GPU, no Triton."""

from __future__ import annotations

import types

import pytest

from kernelsmith.evaluate.judging.evaluation import Evaluation, _Verdict
from kernelsmith.evaluate.judging.judge import Judge
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import ProtocolError
from kernelsmith.evaluate.result import Status
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure
from kernelsmith.evaluate.verdict import Flag

TASK = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.ones(4)]
def get_init_inputs():
    return []
"""


class FakeJudge:
    device, gpu_name, gpu_uuid, torch_version = "cpu", "none", None, "test"
    SANDBOX_START_LIMIT = 5.0
    spares: list = []
    release_cached_memory = Judge.release_cached_memory  # the judge's own: nothing to do off CUDA
    memory_note = Judge.memory_note

    def settle_ahead(self) -> None:  # nothing is loaded ahead here
        return None

    def __init__(self):
        ns: dict = {}
        exec(TASK, ns)
        self.module = types.SimpleNamespace(**ns)


class FakeSandbox:
    """Replies with scripted messages; records what the evaluation sent."""

    def __init__(self, replies: list[dict], plan: containment.Plan | None = None):
        self.replies, self.sent = list(replies), []
        self.info = {"device_activity": False}
        self.workdir = "/nonexistent"
        self.plan = plan or containment.Plan(device="cpu", mode="auto", on={"bwrap": "x"})
        self.forked = False  # bubblewrap's sandboxes are spawned

    def wait_ready(self, deadline):
        return None

    def containment(self):
        return self.plan

    def send(self, msg):
        self.sent.append(msg)

    def wait(self, deadline, memory_limit, stage):
        return self.replies.pop(0)


def _evaluation(**opts) -> Evaluation:
    ev = Evaluation(FakeJudge(), "t" * 16, "c" * 16, EvalOptions(device="cpu", **opts))
    ev.task = ev.j.module
    return ev


@pytest.mark.parametrize(
    "reply, status",
    [
        ({"op": "error", "kind": "compile_error", "error": "SyntaxError"}, Status.compile_error),
        ({"op": "error", "kind": "runtime_error", "error": "boom"}, Status.runtime_error),
        ({"op": "error", "kind": "correct", "error": "I am fine"}, Status.runtime_error),  # may only claim a failure
    ],
)
def test_a_sandbox_error_ends_the_evaluation_with_its_failure_never_a_success(reply, status):
    ev = _evaluation()
    with pytest.raises(_Verdict) as info:
        ev._wait(FakeSandbox([reply]), "load")
    assert info.value.status is status


def test_load_sends_the_job_and_records_containment_and_stage_time():
    ev = _evaluation()
    sb = FakeSandbox([{"op": "loaded"}])
    ev._load(sb, TASK, "class ModelNew: pass")
    assert sb.sent and sb.sent[0]["op"] == "job" and sb.sent[0]["candidate_source"] == "class ModelNew: pass"
    assert ev.base["containment"]["layers"]["bwrap"].startswith("on")
    assert ev.base["containment"]["start"] == "spawned"
    assert ev.stages.load >= 0 and ev.ref_model is not None


def test_load_refuses_in_strict_mode_when_a_layer_failed():
    ev = _evaluation()
    plan = containment.Plan(device="cpu", mode="strict", off={"seccomp": "failed: no filter"})
    with pytest.raises(containment.ContainmentError, match="strict"):
        ev._load(FakeSandbox([{"op": "loaded"}], plan), TASK, "class ModelNew: pass")


def test_correctness_runs_every_trial_then_rejects_work_done_by_no_own_kernel():
    ev = _evaluation(trials=3)
    seen = []
    ev._trial = lambda sb, i: seen.append(i)  # the trials themselves are tested end to end
    ev._correctness(FakeSandbox([]))
    assert seen == [0, 1, 2] and ev.stages.correctness >= 0
    ev.flags[Flag.no_custom_kernel] = "none of its kernels ran"
    with pytest.raises(_Verdict) as info:
        ev._correctness(FakeSandbox([]))
    assert info.value.status is Status.rejected and "none of its kernels ran" in (info.value.error or "")


def test_the_verdict_carries_the_base_facts_and_stages():
    ev = _evaluation()
    r = ev.verdict(Status.incorrect, "trial 1 of 5: off")
    assert r.status is Status.incorrect and not r.correct and not r.success
    assert r.task_hash == "t" * 16 and r.candidate_hash == "c" * 16 and r.stages.total >= 0


def test_every_compiler_cache_of_a_sandbox_is_inside_its_scratch(tmp_path, monkeypatch):
    from kernelsmith.evaluate.sandboxing.process import scrubbed_env
    from kernelsmith.evaluate.sandboxing.sandbox_handle import sandbox_cache_env

    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/torchinductor_root/triton/0")  # as the judge's torch.compile sets it
    env = scrubbed_env(sandbox_cache_env(tmp_path))
    for name in (
        "HOME",
        "TMPDIR",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "TORCH_EXTENSIONS_DIR",
        "XDG_CACHE_HOME",
    ):
        assert env[name].startswith(str(tmp_path)), (name, env[name])


class ClockedSandbox(FakeSandbox):
    """Records the deadline of every wait; a reply that is an exception is raised."""

    def __init__(self, replies):
        super().__init__(replies)
        self.deadlines: list[float] = []

    def wait(self, deadline, memory_limit, stage):
        self.deadlines.append(deadline)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_a_build_in_the_sandbox_has_its_own_limit_and_stops_the_candidates_clock():
    import time

    ev = _evaluation(timeout=10, build_timeout=100)
    ev.deadline = time.monotonic() + 10
    sb = ClockedSandbox(
        [
            {"op": "building", "name": "ext"},
            {"op": "built", "name": "ext", "seconds": 0.0},
            {"op": "loaded", "builds": [{"name": "ext", "source": "sandbox", "ok": True, "seconds": 0.0}]},
        ]
    )
    assert ev._wait(sb, "load")["op"] == "loaded"
    before, during, after = sb.deadlines
    assert 99 < during - before + 10 < 101  # the build's own 100 s
    assert abs(after - before) < 0.5  # the candidate's 10 s resume where they stopped
    assert ev.builds[0].source == "sandbox" and ev.stages.build >= 0


def test_a_build_past_its_limit_is_a_timeout_that_says_so():
    ev = _evaluation(build_timeout=7)
    sb = ClockedSandbox([{"op": "building", "name": "ext"}, SandboxFailure("timeout", "no answer")])
    with pytest.raises(SandboxFailure) as info:
        ev._wait(sb, "load")
    assert info.value.status == "timeout"
    assert "building extension 'ext' took longer than the build time limit (7 s" in info.value.message


def test_a_built_message_without_a_build_is_a_protocol_error():
    ev = _evaluation()
    with pytest.raises(_Verdict) as info:
        ev._wait(ClockedSandbox([{"op": "built", "name": "ext"}]), "load")
    assert info.value.status is Status.runtime_error and "unpaired" in str(info.value.error)


def test_the_kernel_breakdown_comes_from_the_clean_window_when_there_is_one():
    from collections import Counter

    from kernelsmith.evaluate.measuring.activity import Activity

    ev = _evaluation()
    ev.activity = Activity(kernels=Counter(k=5), kernel_ns=Counter(k=5 * 9_000_000), windows=5)  # slowed by the judge
    assert ev.verdict(Status.correct).kernel_ms == pytest.approx(9.0)
    ev.profile_activity = Activity(kernels=Counter(k=3), kernel_ns=Counter(k=3 * 5_000_000), windows=3)
    r = ev.verdict(Status.correct)
    assert r.kernel_ms == pytest.approx(5.0) and r.kernels[0].ms == pytest.approx(5.0) and r.kernels[0].calls == 1.0


class TrialJudge(FakeJudge):
    """Runs no reference: every trial's output is taken as the reference's."""

    def run_reference(self, task, model, seed):
        import torch

        return [torch.ones(4)], torch.arange(4.0) + 1

    def check(self, msg, ref_out, inputs, opts, check_l2=False, precise=None):
        from kernelsmith.evaluate.checks import Comparison

        return Comparison(True, 0.0, 0.0, err_l2=[0.0])


class SlowSandbox(ClockedSandbox):
    def wait(self, deadline, memory_limit, stage):
        import time

        time.sleep(0.05)
        return super().wait(deadline, memory_limit, stage)


ANSWER = {"op": "outputs", "launches": 1, "activity": {}}
REPEAT = {"op": "repeat", "launches": 1, "activity": {}}  # a trial's second call on the same inputs (issue 47)


@pytest.mark.parametrize(
    "failure, why",
    [
        (
            SandboxFailure("timeout", "no answer during correctness trial 2 before the time limit"),
            "no answer during correctness trial 2 before the time limit",
        ),
        (
            SandboxFailure("runtime_error", "candidate process killed by SIGSEGV during correctness trial 2"),
            "candidate process killed by SIGSEGV during correctness trial 2",
        ),
        ({"op": "error", "kind": "runtime_error", "error": "ValueError: boom"}, "ValueError: boom"),
    ],
    ids=["timeout", "crash", "raise"],
)
def test_a_trial_that_ends_the_evaluation_is_recorded_and_its_seconds_kept(failure, why):
    """Issue 29: a timeout in trial 2 read 'correctness 0.00 s, trials 1/1 passed'."""
    ev = Evaluation(TrialJudge(), "t" * 16, "c" * 16, EvalOptions(device="cpu", trials=3))
    ev.task, ev.ref_model = ev.j.module, None
    with pytest.raises((SandboxFailure, _Verdict)):
        ev._correctness(SlowSandbox([ANSWER, REPEAT, failure]))
    assert [(t.ok, t.answered) for t in ev.trials] == [(True, True), (False, False)]
    assert ev.trials[1].message == why and ev.trials[1].max_abs_err is None
    assert ev.stages.correctness >= 0.15  # three waits of 0.05 s
    assert ev.launches == 1  # the answered trial's first call only: launches per call


class WrongOnRepeatJudge(TrialJudge):
    """The second call of each trial is wrong, the first right."""

    def check(self, msg, ref_out, inputs, opts, check_l2=False, precise=None):
        from kernelsmith.evaluate.checks import Comparison

        if msg.get("op") == "repeat":
            return Comparison(False, float("nan"), float("nan"), "output: 2 of 4 elements are not finite")
        return Comparison(True, 0.0, 0.0, err_l2=[0.0])


def test_a_trial_whose_second_call_is_wrong_is_incorrect_and_says_why():
    """Issue 47: a partial writer counting on stale memory is right in the first call and wrong in the
    second, made after the first call's output and the free memory were filled with NaN."""
    ev = Evaluation(WrongOnRepeatJudge(), "t" * 16, "c" * 16, EvalOptions(device="cpu", trials=3))
    ev.task, ev.ref_model = ev.j.module, None
    with pytest.raises(_Verdict) as info:
        ev._correctness(SlowSandbox([ANSWER, REPEAT]))
    assert info.value.status is Status.incorrect
    assert info.value.error.startswith("trial 1 of 3: the second call on the same inputs"), info.value.error
    assert info.value.error.endswith("output: 2 of 4 elements are not finite")
    assert [t.ok for t in ev.trials] == [False]


def test_a_trial_answered_out_of_order_is_a_protocol_error():
    ev = Evaluation(TrialJudge(), "t" * 16, "c" * 16, EvalOptions(device="cpu", trials=1))
    ev.task, ev.ref_model = ev.j.module, None
    with pytest.raises(ProtocolError, match="second call: the sandbox answered 'outputs'"):
        ev._correctness(SlowSandbox([ANSWER, ANSWER]))


def test_a_load_that_ends_the_evaluation_keeps_its_seconds():
    ev = _evaluation()
    with pytest.raises(SandboxFailure):
        ev._load(SlowSandbox([SandboxFailure("timeout", "no answer during load")]), TASK, "class ModelNew: pass")
    assert ev.stages.load >= 0.05


def test_a_build_past_its_limit_keeps_its_seconds_in_the_build_stage():
    ev = _evaluation(build_timeout=7)
    sb = SlowSandbox([{"op": "building", "name": "ext"}, SandboxFailure("timeout", "no answer")])
    with pytest.raises(SandboxFailure):
        ev._wait(sb, "load")
    assert ev.stages.build >= 0.05 and ev.build_used == ev.stages.build


def test_a_timing_run_that_ends_the_evaluation_keeps_its_seconds():
    import time

    def hang(sb):
        time.sleep(0.05)
        raise SandboxFailure("timeout", "no answer during timing before the time limit")

    ev = _evaluation()
    ev._load = lambda sb, task, cand: None
    ev._baselines = lambda: False
    ev._correctness = lambda sb: None
    ev._time = hang
    with pytest.raises(SandboxFailure):
        ev._run(FakeSandbox([]), TASK, "class ModelNew: pass")
    assert ev.stages.timing >= 0.05


# --- the judge's clock over CUDA-graph replays, driven by a fake judge and sandbox ------------------


class GraphJudge(FakeJudge):
    """A CUDA judge whose reference on seed s is the tensor [s, 1]: checksums are easy to predict."""

    device = "cuda"

    def run_reference(self, task, model, seed):
        import torch

        return [torch.zeros(2)], torch.tensor([float(seed % 1000), 1.0])

    def graph_batch_overhead(self, task, ref_out, calls, sets):
        from kernelsmith.evaluate.measuring.activity import Activity

        self.graph_batch = (calls, sets)
        return [0.5, 0.6, 0.5], Activity()

    def batch_overhead(self, task, ref_out, calls):
        from kernelsmith.evaluate.measuring.activity import Activity

        return 0.01, Activity()


class GraphSandbox(FakeSandbox):
    """Answers the graph batch as an honest sandbox would: call k read set k % sets, refilled from
    seed + 1 + (k % sets); every "go" takes `per_go_s` of wall time. `armed=False`: the capture failed."""

    def __init__(self, per_go_s: float = 0.0, armed: bool = True, skip_calls: int = 0):
        super().__init__([])
        self.per_go_s, self.armed, self.skip_calls = per_go_s, armed, skip_calls

    def wait(self, deadline, memory_limit, stage):
        import time

        import torch

        from kernelsmith.evaluate.checksums import checksum_weights

        msg = self.sent[-1]
        if msg["op"] == "batch" and msg.get("graph"):
            self.calls, self.sets = msg["calls"], msg["sets"]
            return {"op": "armed"} if self.armed else {"op": "unarmed", "why": "RuntimeError: capture failed"}
        if msg["op"] == "go":
            t0 = time.perf_counter()
            w0, w1 = checksum_weights([torch.zeros(2)], msg["weight_seed"])[0].tolist()  # one set of weights
            sums = []
            for k in range(self.calls):
                s = msg["seed"] + 1 + k % self.sets if k >= self.skip_calls else 7  # skipped: stale output
                sums.append([float(s % 1000) * w0 + w1])
            time.sleep(max(0.0, self.per_go_s - (time.perf_counter() - t0)))
            return {"op": "batch_done", "checksums": sums, "launches": 0}
        if msg["op"] == "record":
            return {"op": "batch_activity", "activity": {"kernels": {"own_kernel": [self.calls, 1000]}}}
        raise AssertionError(f"unexpected message {msg}")


def _graph_evaluation(monkeypatch) -> Evaluation:
    import torch

    from kernelsmith.evaluate.judging import evaluation_timing
    from kernelsmith.evaluate.result import TimingStats

    monkeypatch.setattr(evaluation_timing, "make_inputs", lambda task, seed, device: [torch.zeros(2)])
    ev = Evaluation(GraphJudge(), "t" * 16, "c" * 16, EvalOptions(device="cpu"))
    ev.task, ev.ref_model, ev.device_activity = ev.j.module, None, True
    ev.own_names = {"own_kernel"}
    ev.err_l2 = [0.0]
    ev.cand = TimingStats.from_samples([0.002] * 10, method="cuda_graph", calls=200)
    return ev


def test_a_graph_timed_candidate_is_clocked_over_graph_replays(monkeypatch):
    ev = _graph_evaluation(monkeypatch)
    sb = GraphSandbox(per_go_s=0.0085)  # 4096 calls of ~2 us in 8.5 ms: as the sandbox says
    clock = ev._batch(sb, ev.cand)
    assert ev.j.graph_batch == (4096, 16) and clock.regime == "graph" and clock.calls == 4096
    assert clock.batches == 2 and not ev.clock.mismatch  # two batches, the fastest agrees
    assert [m["op"] for m in sb.sent] == ["batch", "go", "go", "record"]
    assert ev.flags == {}


@pytest.mark.parametrize("armed", [True, False])
def test_the_judge_hands_its_memory_back_before_the_sandbox_makes_its_batch(monkeypatch, armed: bool):
    """The harness's cost is measured on a reference output and a batch's inputs: on a multi-GB task
    the judge held them (42.8 GiB) while the sandbox armed its batch, which ran out of memory. The
    judge releases them before each batch is sent, graph-armed or (unarmed) call by call."""
    ev = _graph_evaluation(monkeypatch)
    sb = GraphSandbox(per_go_s=0.0085, armed=armed)
    import weakref

    events: list[str] = []
    sent, run_reference, probes = sb.send, ev.j.run_reference, []

    def reference(*a):  # the judge's reference outputs, watched: each must be gone when memory goes back
        inputs, out = run_reference(*a)
        probes.append(weakref.ref(out))
        return inputs, out

    def release():
        events.append("release" if all(p() is None for p in probes) else "release while held")

    monkeypatch.setattr(ev.j, "run_reference", reference)
    monkeypatch.setattr(ev.j, "release_cached_memory", release)
    monkeypatch.setattr(sb, "send", lambda msg: events.append(msg["op"]) or sent(msg))
    if not armed:
        monkeypatch.setattr(ev, "_one_batch", lambda sb, calls, harness: (sb.send({"op": "batch"}), (1.0, 1, 2, []))[1])
        monkeypatch.setattr(ev, "_verify", lambda *a: None)
    ev._batch(sb, ev.cand)
    batches = [i for i, e in enumerate(events) if e == "batch"]
    assert len(batches) >= (1 if armed else 3), events  # unarmed: the graph's try, then batches call by call
    assert all(events[i - 1] in ("release", "batch") for i in batches), events  # nothing held in between
    assert events[batches[0] - 1] == "release" and (armed or events[batches[1] - 1] == "release"), events


def test_a_forged_time_is_overruled_after_as_many_batches_again(monkeypatch):
    ev = _graph_evaluation(monkeypatch)
    ev.cand = ev.cand.model_copy(update={"median_ms": 0.0002})  # claims 0.2 us; the calls take ~2 us
    clock = ev._batch(GraphSandbox(per_go_s=0.0085), ev.cand)
    assert clock.batches == 4 and ev.clock.mismatch and clock.per_call_ms > 0.0015


def test_stale_outputs_in_the_judges_batch_are_incorrect(monkeypatch):
    ev = _graph_evaluation(monkeypatch)
    with pytest.raises(_Verdict) as info:
        ev._batch(GraphSandbox(skip_calls=4096), ev.cand)  # every call's output is a stale one
    assert info.value.status is Status.incorrect and "judge-timed call" in (info.value.error or "")


def test_a_batch_that_cannot_be_captured_is_timed_call_by_call_and_said(monkeypatch):
    ev = _graph_evaluation(monkeypatch)
    sb = GraphSandbox(armed=False)
    eager_batches = []
    monkeypatch.setattr(ev, "_one_batch", lambda sb, calls, harness: eager_batches.append(calls) or (1.0, 1, 2, []))
    monkeypatch.setattr(ev, "_verify", lambda *a: None)
    clock = ev._batch(sb, ev.cand)
    assert clock.regime == "eager" and eager_batches and "could not be captured" in (ev.clock_note or "")
