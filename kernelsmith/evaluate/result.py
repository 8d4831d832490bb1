"""The verdict record: what `kernelsmith eval --json` prints and what the search stores."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evaluate.verdict import Flag, TaskNote, is_success, split_legacy


class Status(str, Enum):
    correct = "correct"
    incorrect = "incorrect"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    rejected = "rejected"


class TimingStats(BaseModel):
    """One timed function: the median is the number that counts. Each of the `reps` samples is one
    call's time, or the mean over `calls` calls (a graph replay's median call, a round of eager calls)."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    reps: int
    # How it was measured (kernelsmith.evaluate.measuring.timing): cuda_graph, cuda_events_sync, eager_stream,
    # cpu_wall, cpu_eager; None in records stored before methods were named.
    method: str | None = None
    calls: int = 1

    @classmethod
    def from_samples(cls, samples_ms: list[float], method: str | None = None, calls: int = 1) -> TimingStats:
        xs = sorted(samples_ms)
        n = len(xs)
        mid = n // 2
        median = xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])
        mean = sum(xs) / n
        var = sum((x - mean) ** 2 for x in xs) / max(n - 1, 1)
        return cls(
            median_ms=median,
            mean_ms=mean,
            min_ms=xs[0],
            max_ms=xs[-1],
            std_ms=var**0.5,
            reps=n,
            method=method,
            calls=calls,
        )

    @property
    def spread(self) -> float:
        """max / min of the samples (1.0 when min is not positive)."""
        return self.max_ms / self.min_ms if self.min_ms > 0 else 1.0


class StageSeconds(BaseModel):
    """Wall-clock seconds spent per stage of one evaluation."""

    static: float = 0.0
    # CUDA C++ / C++ extensions: waiting for the build pool, copying cached builds into the
    # sandbox and loading them, and builds the sandbox ran itself. Not on the candidate's clock.
    build: float = 0.0
    worker_wait: float = 0.0  # waiting for a warm sandbox (only when none was ready yet)
    load: float = 0.0  # import of the candidate, ModelNew construction
    correctness: float = 0.0
    baseline: float = 0.0  # reference and torch.compile timing (0 when cached)
    settle: float = 0.0  # waiting for spare sandboxes to finish starting before the timed stage
    timing: float = 0.0
    total: float = 0.0
    # The timing stage split (seconds, in order): "sandbox" (its own timing run), "check" (the reference on
    # the last timed call's inputs, compared), "harness" (the judge's reference probe and the batch's
    # overhead), "arm" (the batch captured in the sandbox), "batches" (the judge-timed runs), "record"
    # (their activity), "verify" (the checksums checked against the reference).
    timing_parts: dict[str, float] = Field(default_factory=dict)


class TrialReport(BaseModel):
    seed: int
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str | None = None
    # False: the sandbox sent no output (forward raised, crashed or timed out), so the trial's
    # launches are not in the verdict's kernel_launches either.
    answered: bool = True
    sizes: dict[str, int] | None = None  # a trial at another shape of the task's SHAPES: its sizes (None: the main)


class KernelRecord(BaseModel):
    """One kernel that ran on the device during forward (CUDA), or one aten compute op (CPU)."""

    name: str
    count: int
    own: bool  # one of the candidate's own kernels; else a library kernel (or op)
    device_ms: float | None = None  # summed device time over the recorded calls (CUDA)
    # Per forward call (CUDA; recorded over a few untimed calls after the timing run, or over the
    # correctness trials when the evaluation ended before it): launches, device time, and the
    # kernel's share of the forward's device time.
    calls: float | None = None
    ms: float | None = None
    share: float | None = None


class BuildRecord(BaseModel):
    """One extension a candidate loaded (a `load_inline` call) and where its build came from."""

    name: str
    # "pool": built ahead for this evaluation; "cache": built earlier (by any run on this host);
    # "sandbox": built in the candidate's sandbox (arguments known only at run time)
    source: Literal["pool", "cache", "sandbox"]
    ok: bool  # False: the compiler failed (the error is the verdict's)
    seconds: float = 0.0  # in the sandbox: loading the cached library, or the whole build there
    key: str | None = None  # content key in the build cache


class JudgeTiming(BaseModel):
    """The judge's own clock over a batch of calls: what the sandbox cannot touch."""

    calls: int
    wall_ms: float  # request to reply, across a device-wide synchronize (the fastest batch)
    # The harness's own work in the batch, measured by the judge: per call ("eager" regime), or the
    # whole batch's ("graph" regime: refilling the input sets, the in-graph checksums).
    overhead_ms: float
    per_call_ms: float  # (wall - overhead) / calls: an upper bound of one call's time
    regime: str = "eager"  # "eager": calls run one by one from Python; "graph": replays of a CUDA graph
    batches: int = 1  # batches run; the fastest counts
    walls_ms: list[float] = Field(default_factory=list)  # every batch's wall, in the order run
    overhead_samples_ms: list[float] = Field(default_factory=list)  # "graph": each measurement of the harness
    bound_ms: float | None = None  # a sandbox time below this is not believed (judge_clock.judge)


class EvalResult(BaseModel):
    status: Status
    correct: bool
    # Device time per call on CUDA (what a CUDA-graph serving engine pays; `speedup_basis` says which
    # time `speedup` compares), wall time on the CPU (relative only). docs/verdict.md, "Times".
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    candidate_ms: float | None = None
    reference_ms: float | None = None
    compile_ms: float | None = None
    speedup_basis: str | None = None  # "device_time" (CUDA graph), "synced_call" (fallback), "cpu_wall"
    timing_method: str | None = None  # the candidate's: cuda_graph | cuda_events_sync | cpu_wall
    timing_fallback: str | None = None  # why a side was not timed in a CUDA graph
    # Eager call time per call: back-to-back calls, launch overhead included (what an eager caller pays).
    eager_ms: float | None = None
    reference_eager_ms: float | None = None
    compile_eager_ms: float | None = None
    eager_speedup: float | None = None
    eager_speedup_vs_compile: float | None = None
    flags: list[Flag] = Field(default_factory=list)  # what the candidate did that is not allowed
    error: str | None = None
    # The verdict is about the machine, not the candidate: its evaluation worker was lost (twice
    # locally, `attempts` times on Ray). Never cached or reused; the error says what happened.
    infra_error: bool = False
    flag_details: dict[Flag, str] = Field(default_factory=dict)  # flag -> what was seen
    task_notes: dict[TaskNote, str] = Field(default_factory=dict)  # facts of the task, never held against it
    torch_ops: str = "partial"  # the operator rule applied (EvalOptions.torch_ops)
    floor_ms: float | None = None  # the task's roofline floor on this GPU

    device: str = "cpu"
    gpu_name: str | None = None
    gpu_uuid: str | None = None  # the physical GPU (as nvidia-smi -L names it), for multi-GPU runs
    torch_version: str | None = None
    task_hash: str | None = None
    candidate_hash: str | None = None
    triton_kernels: list[str] = Field(default_factory=list)
    cuda_kernels: list[str] = Field(default_factory=list)
    kernel_launches: int | None = None
    kernels: list[KernelRecord] = Field(default_factory=list)  # what ran in forward (correctness trials)
    reference_kernels: list[KernelRecord] = Field(default_factory=list)  # what the reference runs
    # Device time of all kernels of one forward call (CUDA, from the same records), the
    # candidate's and the reference's: beside candidate_ms / reference_ms, what is not kernels
    # (launch gaps, host work) shows.
    kernel_ms: float | None = None
    reference_kernel_ms: float | None = None
    activity_source: str | None = None  # "device" (CUPTI), "aten" (RecordFunction) or "python" (fallback)
    # How the sandbox was contained: mode, layers (on / off and why), the five guarantees.
    containment: dict | None = None
    trials: list[TrialReport] = Field(default_factory=list)
    timing: TimingStats | None = None
    judge_timing: JudgeTiming | None = None
    reference_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    eager_timing: TimingStats | None = None
    reference_eager_timing: TimingStats | None = None
    compile_eager_timing: TimingStats | None = None
    # The baselines were reused, not measured for this verdict; baseline_source says from where:
    # "measured" (for this verdict), "this run" (by the same judge process for an earlier verdict, kept
    # whatever its steadiness or cache setting), "cache" (the per-card cache file). None: not timed.
    baseline_cached: bool = False
    baseline_source: Literal["measured", "this run", "cache"] | None = None
    baseline_unsteady: str | None = None  # the baseline spread too far to be cached: which figure, how far
    compile_baseline_error: str | None = None
    stages: StageSeconds = Field(default_factory=StageSeconds)
    # Loaded ahead of its turn (judging/ahead.py): the seconds of its load and first forward (its kernels'
    # compile) done while the judge judged another; not in `stages`. None: loaded in its turn.
    loaded_ahead_s: float | None = None
    builds: list[BuildRecord] = Field(default_factory=list)
    # Nsight Compute's counters of the heaviest kernels (`eval --profile`, the search's new island
    # bests): a stage after the verdict, which it never changes; None where it did not run.
    counters: CountersReport | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data):
        """Records of older versions: task facts they put among the flags become task notes."""
        if isinstance(data, dict) and data.get("flags"):
            flags, notes = split_legacy(data["flags"])
            if notes:
                data = dict(data)
                data["flags"] = flags
                data["flag_details"] = {k: v for k, v in (data.get("flag_details") or {}).items() if k in flags}
                data["task_notes"] = {**notes, **(data.get("task_notes") or {})}
        if isinstance(data, dict):
            data.pop("host_timing", None)
            if "infra_error" not in data and str(data.get("error") or "").startswith("the evaluation worker"):
                data = {**data, "infra_error": True}  # stored before the field existed
        return data

    @property
    def about_the_candidate(self) -> bool:
        """A verdict that holds for this candidate wherever it runs again, so it may be cached and
        reused: not a timeout (load on the machine can cause one), not an infrastructure error."""
        return self.status is not Status.timeout and not self.infra_error

    @property
    def success(self) -> bool:
        """The one rule (kernelsmith.evaluate.verdict.is_success)."""
        return is_success(self.status, self.flags)

    def to_json(self) -> str:
        return self.model_dump_json()
