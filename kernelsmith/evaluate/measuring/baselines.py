"""The reference's and torch.compile's times, by the harness the candidate gets, measured once per task.

Per side three figures: device time (a CUDA graph, or the per-call fallback when the forward cannot
be captured), eager call time, and on CUDA the per-call synced time beside the graph one, so that a
candidate that cannot be captured is compared like with like. A baseline is stored only when its
own spread is within bounds (`unsteady`): a number that moves more between two measurements than a
gain it would report is not kept for every later evaluation to reuse. An unsteady baseline is
measured once more (torch.compile is not recompiled) before it is given up.

Every payload is also kept in this process's memory, steady or not, whatever the cache setting: a
judge times a task's baselines once and every later candidate of the task (a search's, a model's
regions', `--no-cache`'s) is compared against the same figures; an unsteady payload stays marked so.
`EvalOptions.reuse_baselines=False` measures anew for that verdict. The torch.compile'd reference of
a task whose weights are small is kept too, so that another timing setting (another cache key) of the
task does not compile it again.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import torch

from kernelsmith.evaluate.checks import flatten_outputs
from kernelsmith.evaluate.measuring import roofline, timing
from kernelsmith.evaluate.measuring.activity import ActivityRecorder
from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats
from kernelsmith.evaluate.runtime import PRECISION_KEY, make_inputs

# Bounds of a steady figure. A graph's samples are replay medians: they agree closely (the H200:
# within 0.8 %), so 10 % apart means something else ran. Per-call synced and eager samples carry
# the host's wake-ups, so only a gross outlier counts: a median far above the fastest sample.
GRAPH_SPREAD = (1.10, 0.0005)  # max/min, or max - min in ms
SYNCED_SPREAD = {"cuda": (4.0, 0.2), "cpu": (4.0, 0.5)}  # median/min, or median - min in ms
VERSION = "v4"  # of the payload: older entries are not read (v4: weight_bytes, issue 57)
# Where a verdict's baselines came from: measured for it, measured by this process for an earlier
# verdict (kept whatever its steadiness), or read from the per-card cache file.
MEASURED, THIS_RUN, CACHE = "measured", "this run", "cache"
MEMO_KEEP = 4096  # payloads kept in memory (a few KB each); the oldest goes first
# A compiled reference is kept for the process's life only where its weights are small, and a few.
COMPILED_KEEP_BYTES = 64 * 2**20
COMPILED_KEEP = 8


def unsteady(name: str, stats: TimingStats | None, device: str) -> str | None:
    """Why `stats` is too spread to be cached, or None."""
    if stats is None or stats.reps < 2:
        return None
    if stats.method == "cuda_graph":
        ratio, gap = GRAPH_SPREAD
        if stats.spread > ratio and stats.max_ms - stats.min_ms > gap:
            return f"{name} ({stats.method}) spread {stats.min_ms:.4g}-{stats.max_ms:.4g} ms over {stats.reps} replays"
        return None
    ratio, gap = SYNCED_SPREAD["cuda" if device == "cuda" else "cpu"]
    lo = stats.min_ms
    if lo > 0 and stats.median_ms / lo > ratio and stats.median_ms - lo > gap:
        return f"{name} ({stats.method}) median {stats.median_ms:.4g} ms against its fastest {lo:.4g} ms"
    return None


def _seed() -> int:
    return secrets.randbits(62)


def _weight_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


class BaselineTimer:
    """Measures, keeps and caches the baselines of one judge (its device, GPU, torch)."""

    def __init__(self, device: str, gpu_name: str, torch_version: str, forward, cache: BaselineCache):
        self.device = device
        self.gpu_name = gpu_name
        self.torch_version = torch_version
        self.forward = forward  # (model, inputs) -> output, no sync
        self.cache = cache
        # This process's payloads by cache key, with where a later verdict takes them from (THIS_RUN
        # or CACHE); and the torch.compile'd references of small tasks by task hash.
        self.memo: dict[str, tuple[dict, str]] = {}
        self.compiled: dict[str, Callable] = {}

    def key(self, task_hash: str, opts: EvalOptions) -> str:
        eff = opts.effective_timing()
        timing_key = (
            f"{VERSION}:{PRECISION_KEY}:{self.device}:{opts.l2}:{eff.warmup_ms}:{eff.timing_budget_ms}:{eff.min_reps}:"
            f"{eff.max_reps}:{opts.wants_compile_baseline}"
        )
        return BaselineCache.key(self.gpu_name, self.torch_version, task_hash, timing_key)

    def figures(self, name: str, model, task, opts: EvalOptions, flush: timing.L2Flusher) -> dict:
        """`name` (reference or compile): device time, eager time, and on CUDA the synced per-call time."""
        work = timing.Workload(lambda inputs: self.forward(model, inputs), lambda s: make_inputs(task, s, self.device))
        m = timing.measure(work, opts, _seed(), flush)
        out: dict = {name: m.device, f"{name}_eager": m.eager, f"{name}_fallback": m.fallback}
        if m.device.method == "cuda_graph":
            out[f"{name}_synced"] = timing.synced(work, opts, flush, _seed())
        return out

    def measure(
        self, task, task_hash: str, model, opts: EvalOptions, run_reference, settle=lambda: None
    ) -> tuple[dict, str]:
        """The payload (figures, the task's bytes and FLOPs, the reference's kernels, whether its
        output aliases an input) and where it came from: MEASURED now, THIS_RUN (this process measured
        it for an earlier verdict) or CACHE (the file). A steady payload in memory comes first, then
        the file (another judge may have stored a steady one), then an unsteady one in memory.
        `settle()` runs before anything is timed (the judge waits for its spare sandboxes to start)."""
        key = self.key(task_hash, opts)
        kept = self.memo.get(key) if opts.reuse_baselines else None
        if kept is not None and kept[0].get("unsteady") is None:
            return kept
        if opts.use_baseline_cache and opts.reuse_baselines:
            hit = self.cache.get(key)
            if hit is not None:
                self._remember(key, hit, CACHE)
                return hit, CACHE
        if kept is not None:
            return kept
        settle()
        payload = self._measure(task, task_hash, model, opts, run_reference)
        if payload["unsteady"] is None and opts.use_baseline_cache:
            self.cache.put(key, self.gpu_name, self.torch_version, task_hash, payload)
        self._remember(key, payload, THIS_RUN)
        return payload, MEASURED

    def _remember(self, key: str, payload: dict, source: str) -> None:
        self.memo.pop(key, None)
        self.memo[key] = (payload, source)
        while len(self.memo) > MEMO_KEEP:
            self.memo.pop(next(iter(self.memo)))

    def _measure(self, task, task_hash: str, model, opts: EvalOptions, run_reference) -> dict:
        """Every figure of the payload, measured here."""
        inputs, out = run_reference(task, model, _seed())
        # Inputs and outputs each once (an input written in place and returned once); the weights apart: the
        # judge leaves them out of the floor where the L2 stays warm between timed calls
        task_bytes = roofline.tensor_bytes([list(inputs), out])
        try:
            weight_bytes = roofline.tensor_bytes([list(inputs), out, roofline.weights_read(model, inputs)]) - task_bytes
        except Exception:  # a forward the watch cannot follow: the floor errs low
            weight_bytes = 0
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
            if self.device == "cuda":
                torch.cuda.synchronize()
        flush = timing.L2Flusher(self.device, cold=opts.l2 == "cold")
        payload: dict = self.figures("reference", model, task, opts, flush)
        payload.update(compile=None, compile_error=None)
        if opts.wants_compile_baseline:
            try:
                cmodel = self._compiled(task_hash, model, inputs)
                payload.update(self.figures("compile", cmodel, task, opts, flush))
            except Exception as exc:  # inductor can fail on exotic ops; the verdict does not depend on it
                payload["compile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        why = self._unsteady(payload)
        if why:  # once more, the reference alone (compile's figures are kept as measured)
            payload.update(self.figures("reference", model, task, opts, flush))
            why = self._unsteady(payload)
        payload.update(
            task_bytes=task_bytes,
            weight_bytes=weight_bytes,
            task_flops=task_flops,
            activity=rec.activity.to_message(),
            aliases_input=aliases,
            unsteady=why,
        )
        return payload

    def _compiled(self, task_hash: str, model, inputs: list) -> Callable:
        """The task's torch.compile'd reference, compiled by its first call here, or the one kept for
        the task (any instance of its Model times alike); kept when its weights are small."""
        cmodel = self.compiled.get(task_hash)
        if cmodel is not None:
            return cmodel
        cmodel = torch.compile(model)
        self.forward(cmodel, inputs)  # compiles
        if isinstance(model, torch.nn.Module) and _weight_bytes(model) <= COMPILED_KEEP_BYTES:
            self.compiled[task_hash] = cmodel
            while len(self.compiled) > COMPILED_KEEP:
                self.compiled.pop(next(iter(self.compiled)))
        return cmodel

    def _unsteady(self, payload: dict) -> str | None:
        reasons = [
            unsteady(name, payload.get(name), self.device)
            for name in (
                "reference",
                "reference_eager",
                "reference_synced",
                "compile",
                "compile_eager",
                "compile_synced",
            )
        ]
        found = [r for r in reasons if r]
        return "; ".join(found) if found else None
