"""The timing stages of one evaluation, in the judge: the sandbox's own timing run (both figures), the
calls timed by the judge's clock, and the verdict's times and speedups (docs/verdict.md, "Times").

A mixin of kernelsmith.evaluate.judging.evaluation.Evaluation, whose state it reads (the judge, the options,
the baselines, the flags); kept apart so that each file holds one concern.
"""

from __future__ import annotations

import secrets
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from kernelsmith.evaluate.checks import flatten_outputs
from kernelsmith.evaluate.checksums import checksum_mismatch, checksum_weights
from kernelsmith.evaluate.judging.leaves import Facts, facts_differ
from kernelsmith.evaluate.measuring import judge_clock, roofline
from kernelsmith.evaluate.measuring.activity import Activity
from kernelsmith.evaluate.measuring.breakdown import kernel_breakdown
from kernelsmith.evaluate.protocol import ProtocolError
from kernelsmith.evaluate.result import EvalResult, JudgeTiming, Status, TimingStats
from kernelsmith.evaluate.runtime import make_inputs
from kernelsmith.evaluate.verdict import Flag

if TYPE_CHECKING:
    from kernelsmith.evaluate.judging.judge import Judge
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

# What `speedup` compares, by the candidate's method (docs/verdict.md).
BASIS = {"cuda_graph": "device_time", "cuda_events_sync": "synced_call", "cpu_wall": "cpu_wall"}
# Calls back to back cannot take much less than their kernels' device time: an eager figure below
# this fraction of the graph's is forged (an L2-warm stream of calls is faster than cold ones, by
# less than the ratio of L2 to HBM bandwidth, ~3x on the H200).
EAGER_FLOOR = 0.25


def _seed() -> int:
    return secrets.randbits(62)


class _Verdict(Exception):
    """Ends an evaluation early with this verdict."""

    def __init__(self, status: Status, error: str | None = None):
        super().__init__(error)
        self.status = status
        self.error = error


class Timed:
    """The sandbox's figures for the candidate."""

    def __init__(self, device: TimingStats, eager: TimingStats, fallback: str | None, sets: int):
        self.device, self.eager, self.fallback, self.sets = device, eager, fallback, sets


class TimingStages:
    """The timing stages; see the module's docstring. Raises _Verdict to end an evaluation."""

    # The evaluation's state (kernelsmith.evaluate.judging.evaluation.Evaluation sets these).
    j: Judge
    opts: EvalOptions
    task: types.ModuleType
    ref_model: Any
    baseline: dict
    flags: dict[Flag, str]
    degenerate: bool
    err_l2: list[float]
    ref_activity: Activity
    profile_activity: Activity
    clock: judge_clock.ClockVerdict
    clock_note: str | None = None  # why the judge's clock fell back to calls one by one
    batch_ref: list[Facts | None]  # how the reference's outputs live (judging/leaves.py), for the batch's

    def _wait(self, sb: SandboxHandle, stage: str) -> dict:
        raise NotImplementedError

    def _lap(self, part: str) -> None:
        """Ends the named part of the timing stage (StageSeconds.timing_parts), timed from the last lap."""
        raise NotImplementedError

    def _operators(
        self, act: Activity, where: str, python_launches: int, calls: int, harness: Activity | None = None
    ) -> None:
        raise NotImplementedError

    def precise(self, seed: int) -> Callable[[], list | None]:
        raise NotImplementedError

    def verdict(self, status: Status, error: str | None = None, **extra) -> EvalResult:
        raise NotImplementedError

    def _time(self, sb: SandboxHandle) -> Timed:
        """The sandbox's own timing run; its last timed call's output is checked."""
        j, opts = self.j, self.opts
        seed = _seed()
        graph = j.device == "cuda" and self.baseline.get("reference_fallback") is None
        j.release_cached_memory()
        j.memory_note("timing")
        sb.send({"op": "time", "seed": seed, "options": opts.model_dump(), "graph": graph})
        msg = self._wait(sb, "timing")
        self._lap("sandbox")
        dev, eager = TimingStats(**msg["stats"]), TimingStats(**msg["eager"])
        sets = int(msg.get("sets", 1))
        allowed = {"cuda_graph", "cuda_events_sync"} if graph else {"cuda_events_sync", "cpu_wall"}
        if dev.method not in allowed or sets < 1 or dev.calls < 1:
            raise ProtocolError(f"timing by {dev.method!r} over {sets} input sets was not what the judge asked for")
        window = Activity.from_message(msg.get("activity") or {})
        if window.tampered:
            self.flags[Flag.activity_tampered] = "the activity record of the timing run was stopped or replaced"
        if msg.get("replay") is not None:  # the graph's calls, recorded: the operator rule, and the breakdown
            replay = Activity.from_message(msg["replay"])
            self._operators(replay, "the timed calls", 0, calls=dev.reps * dev.calls)
            self.profile_activity = replay
        elif msg.get("profile"):
            self.profile_activity = Activity.from_message(msg["profile"])
            self.profile_activity.windows = max(1, min(self.profile_activity.windows, 100))
        # Which inputs the last timed call ran on, derived by the judge from the figure's own counts
        # (timing.py): graph replay r refills set j from seed + 1 + r * sets + j; per call, seed + 1 + rep.
        if dev.method == "cuda_graph":
            last_seed = seed + 1 + (dev.reps - 1) * sets + (dev.calls - 1) % sets
        else:
            last_seed = seed + dev.reps
        _, ref_out = j.run_reference(self.task, self.ref_model, last_seed)
        cmp = j.check(msg, ref_out, None, opts, check_l2=self.degenerate, precise=self.precise(last_seed))
        sb.send({"op": "ack"})
        self._lap("check")
        if not cmp.ok:
            raise _Verdict(Status.incorrect, f"output of a timed call: {cmp.message}")
        if not (dev.median_ms > 0 and eager.median_ms > 0):
            raise _Verdict(Status.runtime_error, "the timing reported a non-positive time")
        return Timed(dev, eager, msg.get("fallback") and str(msg["fallback"])[:500], sets)

    # -- the judge's clock ------------------------------------------------------------------------

    def _batch(self, sb: SandboxHandle, cand: TimingStats) -> JudgeTiming:
        """Calls timed by the judge's clock, each checked by its checksum (judge_clock): CUDA-graph
        replays when the candidate's device time came from a graph, else calls one by one. Batches
        run until the fastest agrees with the sandbox's time, at most judge_clock.MAX_BATCHES: a host
        hiccup in one batch is not held against the candidate, and every batch times real,
        checksum-verified calls, so the fastest is still an upper bound."""
        j = self.j
        regime = "graph" if cand.method == "cuda_graph" else "eager"
        j.release_cached_memory()
        j.memory_note("judge-timed calls")
        _, probe = j.run_reference(self.task, self.ref_model, _seed())
        self.batch_ref = [Facts.of(x) if isinstance(x, torch.Tensor) else None for x in flatten_outputs(probe)]
        unarmed, samples = None, []
        if regime == "graph":
            calls = judge_clock.graph_batch_calls(cand.median_ms)
            one_set = roofline.tensor_bytes(make_inputs(self.task, 0, j.device))
            sets = judge_clock.graph_batch_sets(calls, one_set)
            samples, harness = j.graph_batch_overhead(self.task, probe, calls, sets)
            overhead_ms = min(samples)
            probe = None  # the judge's last reference to it: freed before the memory goes back
            self._hand_back()
            self._lap("harness")
            sb.send({"op": "batch", "calls": calls, "graph": True, "sets": sets})
            msg = self._wait(sb, "judge-timed calls")
            self._lap("arm")
            if msg.get("op") == "unarmed":  # the batch could not be captured: calls one by one, said
                regime, unarmed = "eager", str(msg.get("why", ""))[:300]
            elif msg.get("op") != "armed":
                raise ProtocolError(f"unexpected reply {msg.get('op')!r} to the judge-timed calls")
            else:
                self._batch_outputs(msg)
        if regime == "eager":
            if probe is None:
                _, probe = j.run_reference(self.task, self.ref_model, _seed())
            calls = judge_clock.batch_calls(j.device, cand.median_ms)
            sets = calls
            overhead_ms, harness = j.batch_overhead(self.task, probe, calls)
            probe = None
            self._hand_back()
            self._lap("harness")
        if unarmed is not None:
            self.clock_note = f"the judge's batch could not be captured in a CUDA graph ({unarmed}): timed call by call"
        runs: list[tuple[float, int, int, list]] = []
        verdict = None
        while len(runs) < judge_clock.MAX_BATCHES[j.device]:
            runs.append(self._graph_go(sb, calls) if regime == "graph" else self._one_batch(sb, calls, harness))
            if len(runs) >= judge_clock.BATCHES[j.device]:
                fastest = min(r[0] for r in runs)
                high = max(samples) if regime == "graph" and samples else None
                verdict = judge_clock.judge(j.device, regime, cand.median_ms, fastest, calls, overhead_ms, high)
                if not verdict.mismatch or len(runs) >= 2 * judge_clock.BATCHES[j.device]:
                    break
        self._lap("batches")
        if regime == "graph":
            sb.send({"op": "record"})
            msg = self._expect(sb, "batch_activity")
            act = Activity.from_message(msg.get("activity") or {})
            self._operators(act, "the judge-timed calls", 0, calls=calls, harness=harness)
            self._lap("record")
        wall_ms, seed, wseed, sums = min(runs, key=lambda run: run[0])
        self._verify(calls, sets, seed, wseed, sums)
        self._lap("verify")
        assert verdict is not None
        self.clock = verdict
        return JudgeTiming(
            calls=calls,
            wall_ms=wall_ms,
            overhead_ms=overhead_ms,
            per_call_ms=verdict.per_call_ms,
            regime=regime,
            batches=len(runs),
            walls_ms=[r[0] for r in runs],
            overhead_samples_ms=samples if regime == "graph" else [],
            bound_ms=verdict.bound_ms,
        )

    def _hand_back(self) -> None:
        """The judge's memory back to the GPU before the sandbox makes its batch (the caller has dropped
        the reference output it measured the harness on): on a multi-GB task the judge held it and a
        batch's inputs while the sandbox armed its batch (KernelBench's 36_RMSNorm_: 42.8 GiB in the
        judge, the sandbox out of memory, polled on an H100, benchmarks/results/archive/probe_judge_memory_polled_*)."""
        self.j.release_cached_memory()
        self.j.memory_note("judge-timed batch sent")

    def _expect(self, sb: SandboxHandle, op: str) -> dict:
        msg = self._wait(sb, "judge-timed calls")
        if msg.get("op") != op:
            raise ProtocolError(f"unexpected reply {msg.get('op')!r} to the judge-timed calls (expected {op!r})")
        return msg

    def _checked_sums(self, msg: dict, calls: int) -> list:
        sums = msg.get("checksums")
        if not isinstance(sums, list) or len(sums) != calls:
            got = len(sums) if isinstance(sums, list) else "no"
            raise _Verdict(Status.incorrect, f"the judge-timed batch reported {got} of {calls} calls")
        return sums

    def _graph_go(self, sb: SandboxHandle, calls: int) -> tuple[float, int, int, list]:
        """One replay of the armed graph, timed from here: (wall ms, seed, weight seed, checksums)."""
        seed, wseed = _seed(), _seed()
        t0 = time.perf_counter()
        sb.send({"op": "go", "seed": seed, "weight_seed": wseed})
        msg = self._expect(sb, "batch_done")
        wall_ms = (time.perf_counter() - t0) * 1e3
        return wall_ms, seed, wseed, self._checked_sums(msg, calls)

    def _one_batch(self, sb: SandboxHandle, calls: int, harness: Activity) -> tuple[float, int, int, list]:
        """One judge-timed batch of calls run one by one: (wall ms, seed, weight seed, checksums);
        the operator rule runs on its activity."""
        seed, wseed = _seed(), _seed()
        sb.send({"op": "batch", "calls": calls})
        self._expect(sb, "armed")
        t0 = time.perf_counter()
        sb.send({"op": "go", "seed": seed, "weight_seed": wseed})
        msg = self._expect(sb, "batch_done")
        wall_ms = (time.perf_counter() - t0) * 1e3
        sums = self._checked_sums(msg, calls)
        launches = int(msg.get("launches", 0))
        said = self._expect(sb, "batch_activity")
        self._batch_outputs(said)
        act = Activity.from_message(said.get("activity") or {})
        self._operators(act, "the judge-timed calls", launches, calls=calls, harness=harness)
        return wall_ms, seed, wseed, sums

    def _batch_outputs(self, msg: dict) -> None:
        """The batch's outputs lived where the reference's do, with its layout, dtype and shape: their
        checksums alone would not say so (a CPU output's weights are drawn by another generator)."""
        wrong = facts_differ(self.batch_ref, msg.get("outputs", []))
        if wrong:
            raise _Verdict(Status.incorrect, f"the judge-timed calls: {wrong}")

    def _verify(self, calls: int, sets: int, seed: int, wseed: int, sums: list) -> None:
        """Checksums of calls drawn after the batch, against the reference on the same inputs: call k
        read set k % sets, filled from seed + 1 + (k % sets)."""
        j = self.j
        rng = secrets.SystemRandom()
        weights = None
        for k in sorted(rng.sample(range(calls), min(calls, judge_clock.VERIFIED_CALLS))):
            _, ref_out = j.run_reference(self.task, self.ref_model, seed + 1 + k % sets)
            weights = weights or checksum_weights(flatten_outputs(ref_out), wseed)
            got = sums[k] if isinstance(sums[k], list) else []
            bad = checksum_mismatch(flatten_outputs(ref_out), weights, [float(x) for x in got], self.err_l2)
            if bad:
                raise _Verdict(
                    Status.incorrect,
                    f"judge-timed call {k + 1} of {calls}: {bad}: its output is not "
                    "the reference's (work skipped or done on other inputs)",
                )

    # -- the verdict's times ----------------------------------------------------------------------

    def _final(self, timed: Timed, clock: JudgeTiming, source: str) -> EvalResult:
        j, b = self.j, self.baseline
        cand = timed.device
        basis = BASIS.get(cand.method or "", "synced_call")
        ref_t: TimingStats = b["reference"]
        comp_t: TimingStats | None = b.get("compile")
        if basis == "synced_call":  # compared like with like: the baselines' per-call figures
            ref_t = b.get("reference_synced") or ref_t
            comp_t = b.get("compile_synced") or comp_t
        cand_ms = cand.median_ms
        if self.clock.mismatch:
            self.flags[Flag.timing_mismatch] = (
                f"the sandbox timed {cand_ms:.4g} ms a call; the judge's clock gives {clock.per_call_ms:.4g} ms a "
                f"call over {clock.calls} calls ({clock.regime}, harness work subtracted), beyond the margin: "
                "the judge's time is used"
            )
            cand_ms = clock.per_call_ms
        floor = j.floor_ms(b, self.opts.use_baseline_cache, warm_l2=self.opts.l2 == "warm")
        if floor is not None and cand_ms < roofline.FLOOR_MARGIN * floor:
            self.flags[Flag.faster_than_roofline] = (
                f"{cand_ms:.4g} ms is below the task's roofline floor of "
                f"{floor:.4g} ms (bytes / measured bandwidth, FLOPs / measured peak)"
            )
        if cand.method == "cuda_graph" and timed.eager.median_ms < EAGER_FLOOR * cand.median_ms:
            self.flags.setdefault(
                Flag.timing_mismatch,
                f"the eager call time ({timed.eager.median_ms:.4g} ms) is below {EAGER_FLOOR:g}x the device "
                f"time of the same calls ({cand.median_ms:.4g} ms): calls back to back cannot take less "
                "than their kernels",
            )
        ref_e: TimingStats | None = b.get("reference_eager")
        comp_e: TimingStats | None = b.get("compile_eager")
        eager_ms = timed.eager.median_ms
        ref_records, ref_kernel_ms = kernel_breakdown(self.ref_activity, lambda k: False)
        return self.verdict(
            Status.correct,
            speedup=ref_t.median_ms / cand_ms,
            speedup_vs_compile=(comp_t.median_ms / cand_ms) if comp_t else None,
            candidate_ms=cand_ms,
            reference_ms=ref_t.median_ms,
            compile_ms=comp_t.median_ms if comp_t else None,
            speedup_basis=basis,
            timing_method=cand.method,
            timing_fallback="; ".join(x for x in (timed.fallback, b.get("reference_fallback"), self.clock_note) if x)
            or None,
            eager_ms=eager_ms,
            reference_eager_ms=ref_e.median_ms if ref_e else None,
            compile_eager_ms=comp_e.median_ms if comp_e else None,
            eager_speedup=(ref_e.median_ms / eager_ms) if ref_e else None,
            eager_speedup_vs_compile=(comp_e.median_ms / eager_ms) if comp_e else None,
            floor_ms=floor,
            timing=cand,
            judge_timing=clock,
            reference_timing=ref_t,
            compile_timing=comp_t,
            eager_timing=timed.eager,
            reference_eager_timing=ref_e,
            compile_eager_timing=comp_e,
            baseline_cached=source != "measured",
            baseline_source=source,
            baseline_unsteady=b.get("unsteady"),
            compile_baseline_error=b.get("compile_error"),
            reference_kernels=ref_records,
            reference_kernel_ms=ref_kernel_ms if ref_records else None,
        )
