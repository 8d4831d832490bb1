"""The judge: a warm, trusted worker process that decides verdicts for one device.

It never runs candidate code. Per candidate it takes a warm sandbox process, asks it to load
and run the candidate on seeds it draws fresh, runs the reference itself on the same seeds, and
compares what comes back. It also times the eager reference and torch.compile (cached).

Started by kernelsmith.evaluate.judging.worker.
"""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch

from kernelsmith.evaluate.checks import (
    Comparison,
    compare_outputs,
    flatten_outputs,
    output_structure,
    structure_mismatch,
)
from kernelsmith.evaluate.checksums import checksum_weights, weighted_checksums
from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evaluate.judging import ahead
from kernelsmith.evaluate.judging.leaves import input_changed, outputs_against
from kernelsmith.evaluate.measuring import capture, roofline
from kernelsmith.evaluate.measuring.activity import Activity, ActivityRecorder, scaled
from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache
from kernelsmith.evaluate.measuring.baselines import BaselineTimer
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.runtime import make_inputs, refill_inputs, set_precision, synchronize, task_shapes
from kernelsmith.evaluate.sandboxing.process import kill_strays
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle
from kernelsmith.evaluate.sandboxing.template_handle import Template
from kernelsmith.task import load_module


class TaskLoadError(Exception):
    """The task's own code failed in the judge: not the candidate's fault, no verdict."""


def _seed() -> int:
    return secrets.randbits(62)


class Judge:
    # Warm sandboxes kept ready on a GPU: an evaluation (~3 s) is shorter than a sandbox's
    # start (~4 s: torch, triton, CUDA context), so one spare would leave the next one waiting.
    CUDA_SPARES = 2
    SANDBOX_START_LIMIT = 300.0  # seconds for a sandbox to import torch and triton and say ready

    def __init__(self, device: str, tmp: Path, spares: list[SandboxHandle], template: Template | None = None):
        self.device = device
        self.tmp = tmp
        self.spares = spares
        self.template = template  # forks sandboxes with their imports done, once it has done its own
        set_precision()  # the reference, its float64 run and torch.compile at the evaluation's precision
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
        # Spares' GPU warm-up held until the judge's word (see settle), where the host has cores to spare.
        self.overlap = device == "cuda" and (os.cpu_count() or 1) >= 4 and os.environ.get("KERNELSMITH_SETTLE") != "all"
        self.cache = BaselineCache()
        self.timer = BaselineTimer(device, self.gpu_name, self.torch_version, self.forward_nosync, self.cache)
        self._ceilings: dict | None = None
        self.tasks: dict[str, types.ModuleType] = {}
        self.ahead: ahead.Ahead | None = None  # the next candidate, loading or loaded in a spare (ahead.py)

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
            try:
                task_shapes(module)
            except ValueError as exc:
                raise TaskLoadError(f"the task's {exc}") from None
            self.tasks[task_hash] = module
        return self.tasks[task_hash]

    def take_sandbox(self, task_hash: str = "", candidate_hash: str = "") -> tuple[SandboxHandle, ahead.Ahead | None]:
        """A sandbox for this candidate: the one loaded ahead with it (and that record), else a spare."""
        early, self.ahead = self.ahead, None
        if early is not None and early.matches(task_hash, candidate_hash) and early.sb.proc.poll() is None:
            sb = early.take()
            if sb is not None:
                self.top_up()
                return sb, early
        elif early is not None:  # another candidate came: its load is of no use
            early.close()
        return self._spare(), None

    def _spare(self) -> SandboxHandle:
        sb = None
        while self.spares and sb is None:
            cand = self.spares.pop(0)
            if cand.proc.poll() is None:
                sb = cand
            else:
                cand.close()
        sb = sb or SandboxHandle(self.device, self.tmp, template=self.template)
        # Warm the next ones while this one runs. On the CPU they share cores with the candidate,
        # which only adds noise to timings that say little there anyway (docs/benchmarks.md).
        self.top_up()
        return sb

    def load_ahead(self, req: dict, task_hash: str) -> None:
        """Hand the next candidate (the pool's `after`), if of the task `task_hash` being judged, to a spare, to
        load and run once now (ahead.py)."""
        if self.ahead is not None or not ahead.eligible(req, task_hash):
            return
        sb = next((s for s in self.spares if s.proc.poll() is None), None)
        if sb is None:
            return
        self.spares.remove(sb)
        self.top_up()  # started while this one loads
        self.ahead = ahead.Ahead(sb, req, _seed(), EvalOptions(**req["options"]).memory_limit, _seed())

    def settle_ahead(self) -> None:
        """The candidate loading ahead, answered (a bounded wait) and stopped before anything is timed."""
        if self.ahead is not None and not self.ahead.settle():
            self.ahead = None

    def top_up(self) -> None:
        """The spares a judge keeps while it evaluates: CUDA_SPARES on a GPU, one on the CPU."""
        self.top_up_spares(self.CUDA_SPARES if self.device == "cuda" else 1)

    def top_up_spares(self, n: int) -> None:
        while len(self.spares) < n:
            self.spares.append(SandboxHandle(self.device, self.tmp, hold_warm_up=self.overlap, template=self.template))

    def warm_spares(self) -> None:
        """The word to warm up, given to every spare: between evaluations, when nothing is timed."""
        for sb in self.spares:
            sb.warm()

    def release_cached_memory(self) -> None:
        """Give the device memory this judge freed back to the GPU before the sandbox times its
        calls: PyTorch's allocator keeps freed blocks, which no other process can use, and on a multi-GB
        task the sandbox's timing needs them (KernelBench's 36_RMSNorm_ ran out of memory on an H100)."""
        if self.device == "cuda":
            capture.release_memory()

    def memory_note(self, where: str) -> None:
        """KERNELSMITH_MEMORY_LOG=1: a line in the judge's log at each stage of an evaluation: this
        process's allocated and reserved device memory and the GPU's free memory (where a multi-GB
        task's out-of-memory comes from is read there)."""
        if self.device != "cuda" or not os.environ.get("KERNELSMITH_MEMORY_LOG"):
            return
        free, total = torch.cuda.mem_get_info()
        gib = 2**30
        print(
            f"memory at {where} (t={time.time():.3f}, pid {os.getpid()}): judge allocated "
            f"{torch.cuda.memory_allocated() / gib:.2f} GiB, reserved {torch.cuda.memory_reserved() / gib:.2f} GiB; "
            f"GPU free {free / gib:.2f} of {total / gib:.2f} GiB",
            file=sys.stderr,
            flush=True,
        )

    def run_reference(self, task, model, seed: int) -> tuple[list, object]:
        """Inputs for `seed` and the reference's output on them; the task's own failure is no verdict."""
        for attempt in (1, 2):
            try:
                inputs = make_inputs(task, seed, self.device)
                return inputs, self.forward(model, inputs)
            except torch.OutOfMemoryError:  # memory freed but still cached here: give it back, once
                if attempt == 2 or self.device != "cuda":
                    raise
                inputs = None
                self.release_cached_memory()
            except Exception as exc:
                raise TaskLoadError(f"the task's reference failed: {type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable")

    def precise_reference(self, model, task, seed: int) -> list | None:
        """The reference's outputs on the inputs of `seed`, computed in float64 (`model` is a float64
        copy of the task's Model: Evaluation.precise_model), as flat leaves; None where the Model
        cannot run in float64 (an op without a float64 kernel, a dtype fixed inside forward)."""
        try:
            inputs = [
                x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in make_inputs(task, seed, self.device)
            ]
            with torch.no_grad():
                out = model(*inputs)
            synchronize(self.device)
        except Exception:  # the precision rule does not apply; the flat tolerance decides alone
            return None
        return [x.to(torch.float64) if isinstance(x, torch.Tensor) else x for x in flatten_outputs(out)]

    def forward(self, model, inputs):
        out = self.forward_nosync(model, inputs)
        synchronize(self.device)
        return out

    def baselines(self, task, task_hash: str, model, opts: EvalOptions) -> tuple[dict, str]:
        """The reference's and torch.compile's figures (kernelsmith.evaluate.measuring.baselines), with the
        task's bytes, FLOPs, the kernels (or aten ops) one reference call runs, and whether its output
        aliases an input; measured once per task in this process, cached per task and GPU when steady;
        and where they came from ("measured", "this run" or "cache")."""
        return self.timer.measure(task, task_hash, model, opts, self.run_reference, self.settle)

    def settle(self) -> None:
        """Wait until no spare sandbox is warming up beside what is timed next. With `overlap` (a GPU
        host of 4 cores or more) a spare may import torch beside a timed call, but its GPU warm-up
        waits for the word, so only spares told to warm are waited for; otherwise every spare
        finishes starting first (on the 2-core CPU a 0.03 ms reference measured 7 ms while one
        started). KERNELSMITH_SETTLE=all: always the latter."""
        self.settle_ahead()
        deadline = time.monotonic() + self.SANDBOX_START_LIMIT
        for sb in [s for s in self.spares if s.warming or not self.overlap]:
            try:
                sb.wait_ready(deadline)
            except Exception:  # a spare that failed to start is replaced when it is taken
                pass

    def ceilings(self, use_cache: bool = True) -> dict:
        """Measured copy bandwidth and bf16 matmul rate of this GPU (cached per GPU and torch, and in
        this judge's memory; `use_cache=False`: the cache file is neither read nor written)."""
        if self._ceilings is None:
            self._ceilings = roofline.card_ceilings(
                self.gpu_name, self.torch_version, self.cache if use_cache else None
            )
        return self._ceilings

    def floor_ms(self, baseline: dict, use_cache: bool = True, warm_l2: bool = False) -> float | None:
        """The task's roofline floor on this GPU (None on the CPU): its inputs and outputs, and the weights its
        forward reads unless the L2 stays warm between timed calls (then they may never leave it: no floor of HBM's)."""
        if self.device != "cuda":
            return None
        moved = baseline.get("task_bytes", 0) + (0 if warm_l2 else baseline.get("weight_bytes", 0))
        return roofline.floor_ms(moved, baseline.get("task_flops", 0), self.ceilings(use_cache))

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
        from kernelsmith.evaluate.profiling import ncu_stage

        self.settle()  # nothing else on the GPU while Nsight Compute replays kernels
        try:
            return ncu_stage.profile(req["task_source"], req["candidate_source"], float(req.get("timeout", 120.0)))
        finally:
            kill_strays(self.own_pids())

    @staticmethod
    def forward_nosync(model, inputs):
        with torch.no_grad():
            return model(*inputs)

    def batch_overhead(self, task, ref_out, calls: int) -> tuple[float, Activity]:
        """Per call, what the sandbox's eager batch loop does besides forward (refill the inputs, take
        the checksums), timed here in the judge's own process, and what that work launches for
        `calls` calls (weights drawn once, refills and checksums per call): counts the candidate's
        record is reduced by, so that the harness's ops never count as the candidate's."""
        leaves = flatten_outputs(ref_out)
        seed = _seed()
        inputs = make_inputs(task, seed, self.device)
        with ActivityRecorder(self.device) as once:  # the sandbox's batch runs under the recorder too
            weights = checksum_weights(leaves, seed)
            synchronize(self.device)
        probe = min(calls, 8)
        with ActivityRecorder(self.device) as rec:
            refill_inputs(task, inputs, seed + 1, self.device)  # warm-up, outside the clock
            weighted_checksums(leaves, weights)
            synchronize(self.device)
            t0 = time.perf_counter()
            for k in range(probe):
                refill_inputs(task, inputs, seed + 2 + k, self.device)
                weighted_checksums(leaves, weights)
            synchronize(self.device)
            per_call = (time.perf_counter() - t0) * 1e3 / probe
        harness = once.activity
        harness.add(scaled(rec.activity, calls / (probe + 1)))
        return per_call, harness

    def graph_batch_overhead(self, task, ref_out, calls: int, sets: int) -> tuple[list[float], Activity]:
        """The graph batch's own cost for each of judge_clock.HARNESS_GOES "go"s (refills, weights,
        in-graph checksums, the copy back), measured here around a forward that launches nothing, and the
        kernels it runs."""
        from kernelsmith.evaluate.measuring.graph_batch import harness_cost
        from kernelsmith.evaluate.measuring.judge_clock import HARNESS_GOES

        make = lambda s: make_inputs(task, s, self.device)  # noqa: E731
        return harness_cost(ref_out, make, calls, sets, _seed(), self.device, goes=HARNESS_GOES)

    def check(
        self,
        msg: dict,
        ref_out,
        ref_inputs: list | None,
        opts: EvalOptions,
        check_l2: bool = False,
        precise: Callable[[], list | None] | None = None,
    ) -> Comparison:
        """The sandbox's outputs against the reference's (checks.compare_outputs; `precise`: the
        reference's float64 outputs on the same inputs, for the precision rule), then its inputs."""
        wrong_shape = structure_mismatch(output_structure(ref_out), msg.get("structure"))
        if wrong_shape:
            return Comparison(False, message=wrong_shape)
        ref_leaves = flatten_outputs(ref_out)
        got, elsewhere = outputs_against(ref_leaves, msg.get("outputs", []))
        if elsewhere:  # another device, layout, dtype or shape: said before any value is read
            return Comparison(False, message=elsewhere)
        cmp = compare_outputs(ref_leaves, got, opts.atol, opts.rtol, check_l2=check_l2, precise=precise)
        del got
        if cmp.ok and ref_inputs is not None:
            changed = input_changed(ref_inputs, msg.get("inputs", []))
            if changed:
                return Comparison(False, cmp.max_abs_err, cmp.max_rel_err, changed)
        return cmp

    def own_pids(self) -> set[int]:
        """This judge's children that are no candidate's strays: its spares and its template."""
        own = {s.proc.pid for s in self.spares} | ({self.template.proc.pid} if self.template else set())
        return own | ({self.ahead.sb.proc.pid} if self.ahead is not None else set())

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        for sb in self.spares:
            sb.close()
        if self.template is not None:
            self.template.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
