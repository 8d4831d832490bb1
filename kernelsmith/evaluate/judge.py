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

from kernelsmith.evaluate import roofline, timing
from kernelsmith.evaluate.activity import ActivityRecorder
from kernelsmith.evaluate.baseline_cache import BaselineCache
from kernelsmith.evaluate.checks import (
    Comparison,
    compare_outputs,
    flatten_outputs,
    output_structure,
    structure_mismatch,
    weighted_checksums,
)
from kernelsmith.evaluate.containment import ContainmentError
from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.process import kill_strays
from kernelsmith.evaluate.protocol import Channel, ProtocolError, decode_tensor
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evaluate.runtime import excerpt, make_inputs, refill_inputs, synchronize
from kernelsmith.evaluate.sandbox_handle import SandboxHandle
from kernelsmith.task import load_module


class TaskLoadError(Exception):
    """The task's own code failed in the judge: not the candidate's fault, no verdict."""


def _seed() -> int:
    return secrets.randbits(62)


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
        """Eager and torch.compile timings of the reference, with the task's bytes, FLOPs, the
        kernels (or aten ops) one reference call runs, and whether its output aliases an input."""
        eff = opts.effective_timing()
        timing_key = (
            f"v2:{self.device}:{eff.warmup_ms}:{eff.timing_budget_ms}:{eff.min_reps}:{eff.max_reps}:"
            f"{opts.wants_compile_baseline}"
        )
        key = BaselineCache.key(self.gpu_name, self.torch_version, task_hash, timing_key)
        if opts.use_baseline_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return hit, True
        seed = _seed()
        inputs, out = self.run_reference(task, model, seed)
        task_bytes = roofline.tensor_bytes(inputs) + roofline.tensor_bytes(out)
        in_storages = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        aliases = any(
            isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in in_storages for o in flatten_outputs(out)
        )
        try:
            task_flops = roofline.count_flops(model, inputs)
        except Exception:  # an op the counter cannot trace: count bytes only
            task_flops = 0
        del out
        with ActivityRecorder(self.device) as rec:
            self.forward(model, inputs)

        def refill(rep: int) -> None:
            refill_inputs(task, inputs, seed + 1 + rep, self.device)

        flush = timing.L2Flusher(self.device)
        with ActivityRecorder(self.device):  # candidates are timed under the recorder: the same conditions
            ref = timing.benchmark(lambda: self.forward_nosync(model, inputs), opts, flush, refill)
        compiled, compile_error = None, None
        if opts.wants_compile_baseline:
            try:
                cmodel = torch.compile(model)
                self.forward(cmodel, inputs)  # compiles
                with ActivityRecorder(self.device):
                    compiled = timing.benchmark(lambda: self.forward_nosync(cmodel, inputs), opts, flush, refill)
            except Exception as exc:  # inductor can fail on exotic ops; the verdict does not depend on it
                compile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        payload = {
            "reference": ref,
            "compile": compiled,
            "compile_error": compile_error,
            "task_bytes": task_bytes,
            "task_flops": task_flops,
            "activity": rec.activity.to_message(),
            "aliases_input": aliases,
        }
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
        return {
            "device": "cuda",
            "name": self.gpu_name,
            "sm_count": props.multi_processor_count,
            "memory_gb": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
            "bandwidth_gbps": round(ceilings["bandwidth"] / 1e9),
            "bf16_tflops": round(ceilings["flops"] / 1e12),
        }

    def profile(self, req: dict) -> CountersReport:
        """The counters stage (ncu_stage.py), between evaluations: nothing else runs on this GPU."""
        if self.device != "cuda":
            return CountersReport(status="unsupported", message="hardware counters need a CUDA GPU and Nsight Compute")
        from kernelsmith.evaluate import ncu_stage

        try:
            return ncu_stage.profile(req["task_source"], req["candidate_source"], float(req.get("timeout", 120.0)))
        finally:
            kill_strays({s.proc.pid for s in self.spares})

    @staticmethod
    def forward_nosync(model, inputs):
        with torch.no_grad():
            return model(*inputs)

    def batch_overhead(self, task, ref_out, weights: list, calls: int) -> tuple[float, frozenset[str]]:
        """Per call, what the sandbox's batch loop does besides forward (refill the inputs, take
        the checksums), timed here in the judge's own process, and the device kernels that work
        launches (not the candidate's)."""
        leaves = flatten_outputs(ref_out)
        seed = _seed()
        inputs = make_inputs(task, seed, self.device)
        with ActivityRecorder(self.device) as rec:  # the sandbox's batch runs under the recorder too
            refill_inputs(task, inputs, seed + 1, self.device)  # warm-up, outside the clock
            weighted_checksums(leaves, weights)
            synchronize(self.device)
            t0 = time.perf_counter()
            for k in range(calls):
                refill_inputs(task, inputs, seed + 2 + k, self.device)
                weighted_checksums(leaves, weights)
            synchronize(self.device)
            per_call = (time.perf_counter() - t0) * 1e3 / calls
        return per_call, frozenset(rec.activity.kernels) | frozenset(rec.activity.ops)

    def check(
        self, msg: dict, ref_out, ref_inputs: list | None, opts: EvalOptions, check_l2: bool = False
    ) -> Comparison:
        wrong_shape = structure_mismatch(output_structure(ref_out), msg.get("structure"))
        if wrong_shape:
            return Comparison(False, message=wrong_shape)
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
                    return Comparison(
                        False,
                        cmp.max_abs_err,
                        cmp.max_rel_err,
                        f"forward modified its input {i} in place (the reference does not)",
                    )
        del got
        return cmp

    # -- one evaluation --------------------------------------------------------------------
    def evaluate(
        self,
        task_source: str,
        task_hash: str,
        candidate_source: str,
        candidate_hash: str,
        opts: EvalOptions,
        build: dict | None = None,
    ) -> EvalResult:
        from kernelsmith.evaluate.evaluation import Evaluation

        return Evaluation(self, task_hash, candidate_hash, opts, build).run(task_source, candidate_source)

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
            if req.get("op") == "profile":
                chan.send({"op": "profile", "profile": judge.profile(req).model_dump(mode="json")})
                continue
            if req.get("op") != "evaluate":
                return
            try:
                result = judge.evaluate(
                    req["task_source"],
                    req["task_hash"],
                    req["candidate_source"],
                    req["candidate_hash"],
                    EvalOptions(**req["options"]),
                    req.get("build"),
                )
                chan.send({"op": "result", "result": result.model_dump(mode="json")})
            except TaskLoadError as exc:
                chan.send({"op": "task_error", "error": str(exc)})
            except ContainmentError as exc:
                chan.send({"op": "setup_error", "error": str(exc)})
            except Exception as exc:  # a bug of ours: report it with its traceback
                chan.send({"op": "internal_error", "error": excerpt(exc, limit=6000)})
    finally:
        judge.close()
