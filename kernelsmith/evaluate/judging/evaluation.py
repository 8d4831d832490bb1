"""One evaluation, step by step, in the judge: load, correctness trials (each recorded below
Python), the sandbox's timing run, the judge-clocked batch, then the verdict with its flags and
task notes. The judge (kernelsmith.evaluate.judging.judge) owns the warm state this uses: sandboxes, the
task modules, the baselines; the correctness stages are in evaluation_correctness.py, the timing stages in
evaluation_timing.py (both in kernelsmith.evaluate.judging).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

import torch

from kernelsmith.candidate import analyze
from kernelsmith.evaluate.build.cache import BuildCache
from kernelsmith.evaluate.judging import ahead
from kernelsmith.evaluate.judging.ahead import Ahead
from kernelsmith.evaluate.judging.evaluation_correctness import CorrectnessStages
from kernelsmith.evaluate.judging.evaluation_timing import TimingStages, _Verdict
from kernelsmith.evaluate.judging.judge import Judge, TaskLoadError, _seed
from kernelsmith.evaluate.measuring.activity import GLUE_OPS, Activity, is_own_kernel
from kernelsmith.evaluate.measuring.breakdown import kernel_breakdown
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import ProtocolError
from kernelsmith.evaluate.result import (
    BuildRecord,
    EvalResult,
    KernelRecord,
    StageSeconds,
    Status,
    TimingStats,
    TrialReport,
)
from kernelsmith.evaluate.runtime import build_model
from kernelsmith.evaluate.sandboxing.containment import ContainmentError
from kernelsmith.evaluate.sandboxing.process import kill_strays
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure, SandboxHandle
from kernelsmith.evaluate.verdict import Flag, TaskNote

# A reference faster than this (CUDA), when it cannot be timed in a CUDA graph, is mostly launch and
# sync overhead: speedups say little. (In a graph, kernel timestamps time it right from ~2 us.)
TOO_SMALL_MS = 0.02


class Evaluation(CorrectnessStages, TimingStages):
    """One candidate, step by step: load, correctness trials (each recorded below Python), timing
    in the sandbox, the judge-clocked batch, then the verdict with its flags and task notes."""

    def __init__(self, judge: Judge, task_hash: str, candidate_hash: str, opts: EvalOptions, build: dict | None = None):
        self.j = judge
        self.opts = opts
        self.t0 = time.monotonic()
        self.stages = StageSeconds()
        self._lapped = 0.0  # the last lap of the timing stage (StageSeconds.timing_parts)
        # The pool's builds for this candidate ({"env", "root", "keys", "sources", "wait"}), if any.
        self.build = build or {}
        self.builds: list[BuildRecord] = []
        self.building: dict | None = None  # an in-sandbox build under way: its start and the time it took from
        self.build_used = 0.0
        self._loaded_s = 0.0
        self.base: dict[str, object] = dict(
            device=judge.device,
            gpu_name=judge.gpu_name,
            gpu_uuid=judge.gpu_uuid,
            torch_version=judge.torch_version,
            task_hash=task_hash,
            candidate_hash=candidate_hash,
            torch_ops=opts.torch_ops,
        )
        self.task_hash = task_hash
        self.flags: dict[Flag, str] = {}
        self.notes: dict[TaskNote, str] = {}
        self.trials: list[TrialReport] = []
        self.launches = 0
        self.activity = Activity()
        self.profile_activity = Activity()  # the sandbox's untimed calls after timing (CUDA): the breakdown
        self.degenerate = False
        self.err_l2: list[float] = []
        self.own_names: set[str] = set()
        self.ref_activity = Activity()
        self.device_activity = False
        self.deadline = self.t0 + opts.timeout  # reset when the candidate's clock starts (_load)
        self.early: Ahead | None = None  # this candidate's sandbox, if it was loaded ahead (ahead.py)
        self.after: dict | None = None  # the next candidate, to load ahead

    def verdict(self, status: Status, error: str | None = None, **extra) -> EvalResult:
        self.stages.total = time.monotonic() - self.t0 + float(self.build.get("wait", 0.0))
        flags = dict(self.flags)
        ref_names = set(self.ref_activity.kernels)
        # The clean window of the timing stage where there is one; else the correctness trials
        # (the judge runs the reference beside those, so their device times run long).
        source = self.profile_activity if self.profile_activity.kernels else self.activity
        kernels, kernel_ms = kernel_breakdown(source, lambda k: k not in ref_names and is_own_kernel(k, self.own_names))
        if source.kernels:
            extra = {"kernel_ms": kernel_ms, **extra}
        else:  # CPU: the library compute ops (own kernels are not aten ops)
            kernels = [
                KernelRecord(name=k, count=n, own=False)
                for k, n in self.activity.ops.most_common()
                if k not in GLUE_OPS
            ][:40]
        return EvalResult(
            status=status,
            correct=status == Status.correct,
            error=error,
            stages=self.stages,
            flags=sorted(flags),
            flag_details=flags,
            task_notes=dict(self.notes),
            trials=self.trials,
            kernel_launches=self.launches,
            kernels=kernels,
            builds=self.builds,
            **{**self.base, **extra},
        )

    def run(self, task_source: str, candidate_source: str, after: dict | None = None) -> EvalResult:
        """`after`: the candidate the pool will send next, loaded ahead once this one's baselines are done."""
        j = self.j
        facts = analyze(candidate_source)
        self.stages.static = time.monotonic() - self.t0
        if facts.syntax_error:
            return self.verdict(Status.compile_error, facts.syntax_error)
        if not facts.has_model_new:
            return self.verdict(Status.rejected, "the candidate defines no class ModelNew at top level")
        self.base.update(triton_kernels=facts.triton_kernels, cuda_kernels=facts.cuda_kernels)
        self.own_names = facts.device_kernel_names
        self.task = j.task_module(task_source, self.task_hash)
        sb, self.early = j.take_sandbox(self.task_hash, str(self.base["candidate_hash"]))
        self.after = after
        try:
            return self._run(sb, task_source, candidate_source)
        except _Verdict as v:
            return self.verdict(v.status, v.error)
        except SandboxFailure as failure:
            return self.verdict(Status(failure.status), failure.message)
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            return self.verdict(Status.runtime_error, f"bad message from the candidate process: {exc}")
        except torch.OutOfMemoryError as exc:
            # The judge's own copies and checks did not fit beside the sandbox: the task's sizes on this
            # GPU, not a verdict on the candidate (infra_error: never cached, never counted as its fault).
            return self.verdict(Status.runtime_error, _out_of_memory(exc), infra_error=True)
        finally:
            sb.close()
            kill_strays(j.own_pids())
            j.top_up_spares(1)
            j.warm_spares()  # their GPU warm-up now, between evaluations

    def _lap(self, part: str) -> None:
        now = time.monotonic()
        parts = self.stages.timing_parts
        parts[part] = round(parts.get(part, 0.0) + now - self._lapped, 4)
        self._lapped = now

    def _wait(self, sb: SandboxHandle, stage: str) -> dict:
        """The sandbox's next answer. A build it runs itself (load_inline on sources only known at
        run time) comes between "building" and "built": it has its own time limit
        (`build_timeout`, all such builds together), and the candidate's clock stops meanwhile."""
        while True:
            try:
                msg = sb.wait(self.deadline, self.opts.memory_limit, stage)
            except SandboxFailure as failure:
                if self.building is not None and failure.status == "timeout":
                    took = time.monotonic() - self.building["start"]  # the build's seconds, up to its limit
                    self.build_used += took
                    self.stages.build += took
                    raise SandboxFailure(
                        "timeout",
                        f"building extension '{self.building['name']}' took longer than the build time limit "
                        f"({self.opts.build_timeout:g} s, --build-timeout)",
                    ) from None
                raise
            op = msg.get("op")
            if op == "building" and self.building is None:
                now = time.monotonic()
                self.building = {"name": str(msg.get("name", "?"))[:200], "start": now, "left": self.deadline - now}
                self.deadline = now + max(0.0, self.opts.build_timeout - self.build_used)
                continue
            if op == "built" and self.building is not None:
                now = time.monotonic()
                took = now - self.building["start"]
                self.build_used += took
                self.stages.build += took
                self.deadline = now + self.building["left"]
                self.building = None
                continue
            if op in ("building", "built"):
                raise _Verdict(Status.runtime_error, f"bad message from the candidate process: unpaired {op!r}")
            if "builds" in msg:
                self._note_builds(msg["builds"])
            if op == "error":
                raise _Verdict(*_failure(msg))
            return msg

    def _note_builds(self, records) -> None:
        """The sandbox's account of its load_inline calls (cached, built by the pool, built by itself)."""
        self.builds = [BuildRecord.model_validate(r) for r in list(records)[:64]]
        loaded = sum(r.seconds for r in self.builds if r.source != "sandbox")  # cumulative: count the new part
        self.stages.build += loaded - self._loaded_s
        self._loaded_s = loaded

    def _stage_builds(self, sb: SandboxHandle) -> dict | None:
        """Copy the builds the pool made for this candidate into its scratch (hash-checked); the
        job's build settings for the sandbox's load_inline."""
        build = self.build
        self.stages.build += float(build.get("wait", 0.0))
        if not build.get("env"):
            return None
        t0 = time.monotonic()
        staged = sb.workdir / ".ks_builds"
        keys = BuildCache(Path(build["root"])).stage(list(build.get("keys", [])), staged) if build.get("keys") else []
        self.stages.build += time.monotonic() - t0
        sources = {k: v for k, v in dict(build.get("sources", {})).items() if k in keys}
        return {"env": build["env"], "dir": str(staged), "sources": sources}

    def _run(self, sb: SandboxHandle, task_source: str, candidate_source: str) -> EvalResult:
        """The stages in order; each raises _Verdict (or SandboxFailure) to end the evaluation."""
        self._load(sb, task_source, candidate_source)
        self.j.memory_note("load")
        source = self._baselines()
        self.j.memory_note("baselines")
        if self.after is not None and int(self.baseline.get("task_bytes") or 0) <= ahead.MAX_TASK_BYTES:
            self.j.load_ahead(
                self.after, self.task_hash
            )  # nothing is timed until settle: the next one loads beside the trials
        self._correctness(sb)
        self.j.memory_note("correctness")
        t_corr = time.monotonic()
        if self.j.device == "cuda":  # a spare's start beside the timed calls disturbs the GPU and host
            self.j.settle()  # (the CPU's times are relative only; the baselines settle on both)
        else:
            self.j.settle_ahead()
        self.stages.settle = time.monotonic() - t_corr
        self._lapped = time.monotonic()
        try:
            timed = self._time(sb)
            clock = self._batch(sb, timed.device)
        finally:  # a timing run that ended the evaluation counts up to its end
            self.stages.timing = time.monotonic() - t_corr - self.stages.settle
        return self._final(timed, clock, source)

    def _load(self, sb: SandboxHandle, task_source: str, candidate_source: str) -> None:
        """A warm sandbox, its containment checked, the job sent; the reference built here while
        the sandbox imports the candidate and builds ModelNew."""
        j, opts, stages = self.j, self.opts, self.stages
        # Waiting for a sandbox to start is the evaluator's time, not the candidate's: on a
        # busy machine a start can take longer than a short candidate time limit.
        sb.wait_ready(time.monotonic() + j.SANDBOX_START_LIMIT)
        contained = sb.containment()
        # forked from the judge's template (imports done) or spawned: the same layers either way
        self.base["containment"] = {**contained.summary(), "start": "forked" if sb.forked else "spawned"}
        if contained.strict_unmet():
            raise ContainmentError(
                "KERNELSMITH_SANDBOX=strict: the sandbox could not apply its containment: "
                + "; ".join(f"{k} {v}" for k, v in contained.off.items())
            )
        self.device_activity = bool(sb.info.get("device_activity")) and j.device == "cuda"
        stages.worker_wait = time.monotonic() - self.t0 - stages.static
        t_stage = time.monotonic()
        if self.early is not None:  # sent its job while another was judged: its answer waits to be read
            seed_init = self.early.seed_init
            self.base["loaded_ahead_s"] = self.early.head_start(self.t0)
        else:
            job_build = self._stage_builds(sb)
            seed_init = _seed()
            sb.send(ahead.job(sb, task_source, candidate_source, seed_init, job_build))
        staging = time.monotonic() - t_stage
        self.deadline = time.monotonic() + opts.timeout
        try:
            self.ref_model = build_model(self.task.Model, self.task, seed_init, j.device)
        except Exception as exc:
            raise TaskLoadError(f"the task's Model failed to build: {type(exc).__name__}: {exc}") from None
        try:
            self._wait(sb, "load")
        finally:  # a load that ended the evaluation counts up to its end
            stages.load = time.monotonic() - self.t0 - stages.static - stages.worker_wait - staging - self.build_used

    def _baselines(self) -> str:
        """The reference's (and torch.compile's) timings, measured once per task by this judge and
        cached per task and GPU; the task's own notes. Returns where they came from ("measured",
        "this run", "cache")."""
        j, opts, stages = self.j, self.opts, self.stages
        t_load = time.monotonic()
        self.baseline, source = j.baselines(self.task, self.task_hash, self.ref_model, opts)
        self.ref_activity = Activity.from_message(self.baseline.get("activity") or {})
        if self.baseline.get("aliases_input"):
            self.notes[TaskNote.output_aliases_input] = "the reference returns (a view of) one of its inputs"
        ref_t: TimingStats = self.baseline["reference"]
        if j.device == "cuda" and ref_t.method != "cuda_graph" and ref_t.median_ms < TOO_SMALL_MS:
            self.notes[TaskNote.too_small_to_time] = (
                f"the reference runs {ref_t.median_ms * 1e3:.3g} us: launch and "
                "synchronisation overhead dominate its speedups"
            )
        stages.baseline = time.monotonic() - t_load
        self.deadline += stages.baseline  # the judge's own time is not the candidate's
        return source


def _failure(msg: dict) -> tuple[Status, str]:
    """A sandbox's own error report. It may only claim a failure, never a success."""
    kind = msg.get("kind")
    status = Status(kind) if kind in ("compile_error", "runtime_error") else Status.runtime_error
    return status, str(msg.get("error", ""))[:4000]


def _out_of_memory(exc: BaseException) -> str:
    """The judge's out-of-memory in one line: what it asked for, where in the judge, the GPU's memory."""
    what = ". ".join(str(exc).split(". ")[:2])
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if "kernelsmith" in f.filename]
    where = f" in {Path(ours[-1].filename).name}:{ours[-1].name}" if ours else ""
    try:
        free, total = torch.cuda.mem_get_info()
        gpu = f"; {free / 2**30:.1f} of {total / 2**30:.1f} GiB free now"
    except Exception:  # noqa: BLE001 - no CUDA here (a torch built without it raises AssertionError)
        gpu = ""
    return (
        f"the judge ran out of GPU memory checking this candidate{where} ({what}{gpu}): the task's sizes "
        "do not fit this GPU beside the judge's copies of its inputs and outputs"
    )
