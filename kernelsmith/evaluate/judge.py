"""The judge: a warm, trusted worker process that decides verdicts for one device.

It never runs candidate code. Per candidate it takes a warm sandbox process, asks it to load
and run the candidate on seeds it draws fresh, runs the reference itself on the same seeds, and
compares what comes back. It also times the eager reference and torch.compile (cached).

Started by kernelsmith.evaluate.worker.
"""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import time
import types
from pathlib import Path

import torch

from kernelsmith.candidate import analyze
from kernelsmith.evaluate import roofline, timing
from kernelsmith.evaluate.baseline_cache import BaselineCache
from kernelsmith.evaluate.checks import Comparison, compare_outputs, flatten_outputs, is_degenerate
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.process import kill_strays
from kernelsmith.evaluate.protocol import Channel, ProtocolError, decode_tensor
from kernelsmith.evaluate.result import EvalResult, StageSeconds, Status, TimingStats, TrialReport
from kernelsmith.evaluate.runtime import build_model, excerpt, make_inputs, refill_inputs, synchronize
from kernelsmith.evaluate.sandbox_handle import SandboxFailure, SandboxHandle
from kernelsmith.task import load_module


class TaskLoadError(Exception):
    """The task's own code failed in the judge: not the candidate's fault, no verdict."""


# Host time per call above UNSYNCED_FACTOR x event time + UNSYNCED_SLACK_MS means work the events
# on the current stream did not see. The slack covers what the host clock adds to an honest call
# (Python launch overhead the flush hides from the events, sync latency): measured on the H200,
# 0.09 ms for a 0.07 ms softmax, so 0.05 ms flagged an honest call. Hidden work smaller than the
# slack is left to the roofline flag.
UNSYNCED_FACTOR = 1.5
UNSYNCED_SLACK_MS = 0.2


def _seed() -> int:
    return secrets.randbits(62)


def _failure(msg: dict) -> tuple[Status, str]:
    """A sandbox's own error report. It may only claim a failure, never a success."""
    kind = msg.get("kind")
    status = Status(kind) if kind in ("compile_error", "runtime_error") else Status.runtime_error
    return status, str(msg.get("error", ""))[:4000]


def _decode_leaves(items: list) -> list:
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ProtocolError("output leaf is not a message")
        out.append(item.get("value") if item.get("kind") == "value" else decode_tensor(item))
    return out


class Judge:
    # Warm sandboxes kept ready on a GPU: an evaluation (~3 s) is shorter than a sandbox's
    # start (~4 s: torch, triton, CUDA context), so one spare would leave the next one waiting.
    CUDA_SPARES = 2
    SANDBOX_START_LIMIT = 300.0  # seconds for a sandbox to import torch and triton and say ready

    def __init__(self, device: str, tmp: Path, spares: list[SandboxHandle]):
        self.device = device
        self.tmp = tmp
        self.spares = spares
        self.gpu_uuid: str | None = None  # which physical GPU: several of one model look alike by name
        if device == "cuda":
            torch.cuda.init()
            self.gpu_name = torch.cuda.get_device_name()
            try:
                self.gpu_uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
            except (AttributeError, RuntimeError):
                pass
        else:
            self.gpu_name = f"cpu:{platform.processor() or platform.machine()}"
        self.torch_version = str(torch.__version__)
        self.cache = BaselineCache()
        self.tasks: dict[str, types.ModuleType] = {}

    # -- helpers ---------------------------------------------------------------------------
    def task_module(self, source: str, task_hash: str) -> types.ModuleType:
        if task_hash not in self.tasks:
            try:
                module = load_module(source, self.tmp / f"task_{task_hash}.py", f"ks_task_{task_hash}")
            except BaseException as exc:
                raise TaskLoadError(f"the task failed to load: {type(exc).__name__}: {exc}") from None
            for name in ("Model", "get_inputs"):
                if not hasattr(module, name):
                    raise TaskLoadError(f"the task defines no {name}")
            self.tasks[task_hash] = module
        return self.tasks[task_hash]

    def take_sandbox(self) -> SandboxHandle:
        sb = None
        while self.spares and sb is None:
            cand = self.spares.pop(0)
            if cand.proc.poll() is None:
                sb = cand
            else:
                cand.close()
        sb = sb or SandboxHandle(self.device, self.tmp)
        # Warm the next ones while this one runs. On the CPU they share cores with the candidate,
        # which only adds noise to timings that say little there anyway (docs/benchmarks.md).
        self.top_up_spares(self.CUDA_SPARES if self.device == "cuda" else 1)
        return sb

    def top_up_spares(self, n: int) -> None:
        while len(self.spares) < n:
            self.spares.append(SandboxHandle(self.device, self.tmp))

    def run_reference(self, task, model, seed: int) -> tuple[list, object]:
        """Inputs for `seed` and the reference's output on them; the task's own failure is no verdict."""
        try:
            inputs = make_inputs(task, seed, self.device)
            return inputs, self.forward(model, inputs)
        except Exception as exc:
            raise TaskLoadError(f"the task's reference failed: {type(exc).__name__}: {exc}") from None

    def forward(self, model, inputs):
        out = self.forward_nosync(model, inputs)
        synchronize(self.device)
        return out

    def baselines(self, task, task_hash: str, model, opts: EvalOptions) -> tuple[dict, bool]:
        """Eager and torch.compile timings of the reference, with the task's bytes and FLOPs."""
        eff = opts.effective_timing()
        timing_key = (f"{self.device}:{eff.warmup_ms}:{eff.timing_budget_ms}:{eff.min_reps}:{eff.max_reps}:"
                      f"{opts.wants_compile_baseline}")
        key = BaselineCache.key(self.gpu_name, self.torch_version, task_hash, timing_key)
        if opts.use_baseline_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return hit, True
        seed = _seed()
        inputs, out = self.run_reference(task, model, seed)
        task_bytes = roofline.tensor_bytes(inputs) + roofline.tensor_bytes(out)
        try:
            task_flops = roofline.count_flops(model, inputs)
        except Exception:  # an op the counter cannot trace: count bytes only
            task_flops = 0
        del out

        def refill(rep: int) -> None:
            refill_inputs(task, inputs, seed + 1 + rep, self.device)

        flush = timing.L2Flusher(self.device)
        ref, _ = timing.benchmark(lambda: self.forward_nosync(model, inputs), opts, flush, refill)
        compiled, compile_error = None, None
        if opts.wants_compile_baseline:
            try:
                cmodel = torch.compile(model)
                self.forward(cmodel, inputs)  # compiles
                compiled, _ = timing.benchmark(lambda: self.forward_nosync(cmodel, inputs), opts, flush, refill)
            except Exception as exc:  # inductor can fail on exotic ops; the verdict does not depend on it
                compile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        payload = {"reference": ref, "compile": compiled, "compile_error": compile_error,
                   "task_bytes": task_bytes, "task_flops": task_flops}
        self.cache.put(key, self.gpu_name, self.torch_version, task_hash, payload)
        return payload, False

    def ceilings(self) -> dict:
        """Measured copy bandwidth and bf16 matmul rate of this GPU (cached per GPU and torch)."""
        key = f"ceilings|{self.gpu_name}|{self.torch_version}"
        ceilings = self.cache.get(key)
        if ceilings is None:
            ceilings = roofline.measure_ceilings()
            self.cache.put(key, self.gpu_name, self.torch_version, "", ceilings)
        return ceilings

    def floor_ms(self, baseline: dict) -> float | None:
        """The task's roofline floor on this GPU (None on the CPU)."""
        if self.device != "cuda":
            return None
        return roofline.floor_ms(baseline.get("task_bytes", 0), baseline.get("task_flops", 0), self.ceilings())

    def hardware(self) -> dict:
        """What a prompt says about the machine: name, SM count, memory, measured ceilings."""
        if self.device != "cuda":
            return {"device": "cpu", "name": self.gpu_name, "cores": os.cpu_count()}
        props = torch.cuda.get_device_properties(0)
        ceilings = self.ceilings()
        return {"device": "cuda", "name": self.gpu_name, "sm_count": props.multi_processor_count,
                "memory_gb": round(props.total_memory / 2**30, 1), "capability": f"{props.major}.{props.minor}",
                "bandwidth_gbps": round(ceilings["bandwidth"] / 1e9), "bf16_tflops": round(ceilings["flops"] / 1e12)}

    @staticmethod
    def forward_nosync(model, inputs):
        with torch.no_grad():
            return model(*inputs)

    def check(self, msg: dict, ref_out, ref_inputs: list | None, opts: EvalOptions,
              check_l2: bool = False) -> Comparison:
        got = _decode_leaves(msg.get("outputs", []))
        ref_leaves = flatten_outputs(ref_out)
        cmp = compare_outputs(ref_leaves, got, opts.atol, opts.rtol, check_l2=check_l2)
        if cmp.ok and ref_inputs is not None:
            got_inputs = _decode_leaves(msg.get("inputs", []))
            if len(got_inputs) != len(ref_inputs):
                return Comparison(False, message="the inputs came back changed in number")
            for i, (r, g) in enumerate(zip(ref_inputs, got_inputs)):
                if isinstance(r, torch.Tensor) and not (
                    isinstance(g, torch.Tensor) and g.shape == r.shape and g.dtype == r.dtype and torch.equal(g, r)
                ):
                    return Comparison(False, cmp.max_abs_err, cmp.max_rel_err,
                                      f"forward modified its input {i} in place (the reference does not)")
        del got
        return cmp

    # -- one evaluation --------------------------------------------------------------------
    def evaluate(self, task_source: str, task_hash: str, candidate_source: str, candidate_hash: str,
                 opts: EvalOptions) -> EvalResult:
        t0 = time.monotonic()
        stages = StageSeconds()
        base = dict(device=self.device, gpu_name=self.gpu_name, gpu_uuid=self.gpu_uuid,
                    torch_version=self.torch_version, task_hash=task_hash, candidate_hash=candidate_hash)

        def verdict(status: Status, error: str | None = None, **extra) -> EvalResult:
            stages.total = time.monotonic() - t0
            details = dict(base.get("flag_details", {}))
            fields = {**base, "flags": sorted(details), "flag_details": details, **extra}
            return EvalResult(status=status, correct=status == Status.correct, error=error, stages=stages, **fields)

        facts = analyze(candidate_source)
        stages.static = time.monotonic() - t0
        if facts.syntax_error:
            return verdict(Status.compile_error, facts.syntax_error)
        if not facts.has_model_new:
            return verdict(Status.rejected, "the candidate defines no class ModelNew at top level")
        base.update(triton_kernels=facts.triton_kernels, cuda_kernels=facts.cuda_kernels)
        task = self.task_module(task_source, task_hash)

        sb = self.take_sandbox()
        trials: list[TrialReport] = []
        flags: dict[str, str] = {}
        base.update(flag_details=flags)  # filled in as findings come; verdict() derives `flags`
        launches = 0
        try:
            # Waiting for a sandbox to start is the evaluator's time, not the candidate's: on a
            # busy machine a start can take longer than a short candidate time limit.
            sb.wait_ready(time.monotonic() + self.SANDBOX_START_LIMIT)
            stages.worker_wait = time.monotonic() - t0 - stages.static
            deadline = time.monotonic() + opts.timeout
            seed_init = _seed()
            sb.send({"op": "job", "workdir": str(sb.workdir), "task_source": task_source,
                     "candidate_source": candidate_source, "seed_init": seed_init})
            try:
                ref_model = build_model(task.Model, task, seed_init, self.device)
            except Exception as exc:
                raise TaskLoadError(f"the task's Model failed to build: {type(exc).__name__}: {exc}") from None
            msg = sb.wait(deadline, opts.memory_limit, "load")
            if msg.get("op") == "error":
                return verdict(*_failure(msg))
            t_load = time.monotonic()
            stages.load = t_load - t0 - stages.static - stages.worker_wait

            baseline, cached = self.baselines(task, task_hash, ref_model, opts)
            t_base = time.monotonic()
            stages.baseline = t_base - t_load
            deadline += stages.baseline  # the judge's own time is not the candidate's

            degenerate = False
            for i in range(opts.trials):
                seed = _seed()
                sb.send({"op": "trial", "seed": seed, "record_ops": i == 0})
                inputs, ref_out = self.run_reference(task, ref_model, seed)
                msg = sb.wait(deadline, opts.memory_limit, f"correctness trial {i + 1}")
                if msg.get("op") == "error":
                    return verdict(*_failure(msg), trials=trials)
                launched = int(msg.get("launches", 0))
                launches += launched
                if i == 0:
                    degenerate = is_degenerate(flatten_outputs(ref_out), opts.atol, opts.rtol)
                    if degenerate:
                        flags["degenerate_task"] = ("an all-zero or constant output passes this task's elementwise "
                                                    "tolerance; outputs were also checked by relative L2 error")
                    ops = [str(o) for o in msg.get("compute_ops", [])][:20]
                    if ops:
                        flags["torch_compute_op"] = "torch ran compute ops in forward: " + ", ".join(ops)
                threads = [str(t) for t in msg.get("threads", [])][:10]
                if threads:
                    flags["background_thread"] = "threads still running after forward: " + ", ".join(threads)
                cmp = self.check(msg, ref_out, inputs, opts, check_l2=degenerate)
                sb.send({"op": "ack"})
                trials.append(TrialReport(seed=seed, ok=cmp.ok, max_abs_err=cmp.max_abs_err,
                                          max_rel_err=cmp.max_rel_err, message=cmp.message))
                if launched == 0:
                    flags["no_custom_kernel"] = f"no custom kernel ran during forward in trial {i + 1}"
                    return verdict(Status.rejected, f"no custom kernel (Triton or CUDA extension) ran during forward "
                                   f"in trial {i + 1}: the work must be done by the candidate's own kernels",
                                   trials=trials, kernel_launches=launches)
                if not cmp.ok:
                    stages.correctness = time.monotonic() - t_base
                    return verdict(Status.incorrect, f"trial {i + 1} of {opts.trials}: {cmp.message}",
                                   trials=trials, kernel_launches=launches)
            t_corr = time.monotonic()
            stages.correctness = t_corr - t_base

            seed = _seed()
            sb.send({"op": "time", "seed": seed, "options": opts.model_dump()})
            msg = sb.wait(deadline, opts.memory_limit, "timing")
            if msg.get("op") == "error":
                return verdict(*_failure(msg), trials=trials)
            cand = TimingStats(**msg["stats"])
            host = TimingStats(**msg["host_stats"]) if msg.get("host_stats") else None
            # Timed call k ran on inputs of seed + 1 + k; the last one's output is checked. The
            # judge derives that seed from the number of calls instead of taking it as told.
            last_seed = seed + cand.reps + (host.reps if host else 0)
            _, ref_out = self.run_reference(task, ref_model, last_seed)
            cmp = self.check(msg, ref_out, None, opts, check_l2=degenerate)
            sb.send({"op": "ack"})
            stages.timing = time.monotonic() - t_corr
            if not cmp.ok:
                return verdict(Status.incorrect, f"output of a timed call: {cmp.message}",
                               trials=trials, kernel_launches=launches)
            if not cand.median_ms > 0:
                return verdict(Status.runtime_error, "the timing reported a non-positive time", trials=trials)
        except SandboxFailure as failure:
            return verdict(Status(failure.status), failure.message, trials=trials)
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            return verdict(Status.runtime_error, f"bad message from the candidate process: {exc}", trials=trials)
        finally:
            sb.close()
            kill_strays({s.proc.pid for s in self.spares})
            self.top_up_spares(1)

        cand_ms = cand.median_ms
        if host is not None and host.median_ms > UNSYNCED_FACTOR * cand_ms + UNSYNCED_SLACK_MS:
            flags["unsynced_work"] = (f"a call takes {host.median_ms:.4g} ms on the host clock across a device-wide "
                                      f"sync but {cand_ms:.4g} ms on the stream's events: work runs outside the "
                                      "timed stream; the host time is used")
            cand_ms = host.median_ms
        floor = self.floor_ms(baseline)
        if floor is not None and cand_ms < roofline.FLOOR_MARGIN * floor:
            flags["faster_than_roofline"] = (f"{cand_ms:.4g} ms is below the task's roofline floor of {floor:.4g} ms "
                                             "(bytes / measured bandwidth, FLOPs / measured peak)")
        ref_t: TimingStats = baseline["reference"]
        comp_t: TimingStats | None = baseline["compile"]
        return verdict(
            Status.correct,
            speedup=ref_t.median_ms / cand_ms,
            speedup_vs_compile=(comp_t.median_ms / cand_ms) if comp_t else None,
            candidate_ms=cand_ms, reference_ms=ref_t.median_ms,
            compile_ms=comp_t.median_ms if comp_t else None, floor_ms=floor,
            timing=cand, host_timing=host, reference_timing=ref_t, compile_timing=comp_t, baseline_cached=cached,
            compile_baseline_error=baseline.get("compile_error"), trials=trials, kernel_launches=launches,
        )

    def close(self) -> None:
        for sb in self.spares:
            sb.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def serve(chan: Channel, device: str, tmp: Path, spares: list[SandboxHandle]) -> None:
    judge = Judge(device, tmp, spares)
    chan.send({"op": "ready", "gpu_name": judge.gpu_name, "torch_version": judge.torch_version})
    try:
        while True:
            try:
                req = chan.recv()
            except (EOFError, ConnectionError):
                return
            if req.get("op") == "hardware":
                chan.send({"op": "hardware", "hardware": judge.hardware()})
                continue
            if req.get("op") != "evaluate":
                return
            try:
                result = judge.evaluate(req["task_source"], req["task_hash"], req["candidate_source"],
                                        req["candidate_hash"], EvalOptions(**req["options"]))
                chan.send({"op": "result", "result": result.model_dump(mode="json")})
            except TaskLoadError as exc:
                chan.send({"op": "task_error", "error": str(exc)})
            except Exception as exc:  # a bug of ours: report it with its traceback
                chan.send({"op": "internal_error", "error": excerpt(exc, limit=6000)})
    finally:
        judge.close()
