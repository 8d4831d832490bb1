"""Timers of a forward's device time per call that share no code with kernelsmith's harness (CUDA),
for benchmarks/timing_gpu.py to set the verdicts against:

* warm: triton.testing.do_bench_cudagraph: one input set, n calls back to back in one CUDA graph, CUDA
  events around each replay, per call; the median of DBCG_RUNS runs. Whatever a call leaves in the L2
  (its inputs, the weights) the next finds there: compare with verdicts taken with l2="warm".
* cold: a flush-subtracted graph: CUDA events around replays of one graph of [256 MiB flush, call] x n
  and of one of [flush] x n (a different flush op from the harness's), alternating, COLD_ROUNDS each;
  (median with calls - median flush only) / n. Each call finds an L2 full of the flush's lines, as in
  the default verdicts.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import torch
import triton.testing

from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.task import load_module

FLUSH_BYTES = 256 * 2**20
COLD_GRAPH_MS = 25.0  # one replay of the graph with calls, about
COLD_CALLS = (3, 200)
COLD_ROUNDS = 15
DBCG_RUNS = 3
DBCG_REP_MS = 20


def _events_ms(fn, reps: int = 1) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def warm_ms(fn) -> dict:
    def once() -> float:
        with torch.cuda.stream(torch.cuda.Stream()):  # older Triton refuses to capture on the default stream
            try:
                return triton.testing.do_bench_cudagraph(fn, rep=DBCG_REP_MS, return_mode="median")
            except TypeError:  # a Triton without return_mode: its mean over 10 replays
                return triton.testing.do_bench_cudagraph(fn, rep=DBCG_REP_MS)

    runs = [once() for _ in range(DBCG_RUNS)]
    return {
        "ms": statistics.median(runs),
        "runs_ms": runs,
        "method": f"triton.testing.do_bench_cudagraph(rep={DBCG_REP_MS}, return_mode='median'), median of {DBCG_RUNS}",
    }


def cold_ms(fn) -> dict:
    buf = torch.zeros(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def flush() -> None:
        buf.add_(1)  # reads and writes 256 MiB: every line of the L2 is the flush's afterwards

    flush()
    fn()
    torch.cuda.synchronize()
    one = _events_ms(lambda: (flush(), fn()), 5)
    calls = int(min(max(math.ceil(COLD_GRAPH_MS / max(one, 1e-3)), COLD_CALLS[0]), COLD_CALLS[1]))
    with_calls, flush_only = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(with_calls):
        for _ in range(calls):
            flush()
            fn()
    with torch.cuda.graph(flush_only):
        for _ in range(calls):
            flush()
    with_calls.replay()  # the first replay uploads the graph: untimed
    flush_only.replay()
    torch.cuda.synchronize()
    timed: dict[str, list[float]] = {"with_calls": [], "flush_only": []}
    for r in range(COLD_ROUNDS):
        order = (("with_calls", with_calls), ("flush_only", flush_only))
        for name, graph in order if r % 2 == 0 else order[::-1]:
            timed[name].append(_events_ms(graph.replay))
    per_call = (statistics.median(timed["with_calls"]) - statistics.median(timed["flush_only"])) / calls
    rounds = [(a - b) / calls for a, b in zip(timed["with_calls"], timed["flush_only"])]
    return {
        "ms": per_call,
        "calls": calls,
        "rounds": COLD_ROUNDS,
        "per_round_ms": {"min": min(rounds), "median": statistics.median(rounds), "max": max(rounds)},
        "flush_ms": statistics.median(timed["flush_only"]) / calls,
        "method": "graph [256 MiB flush, call] x n minus graph [flush] x n, CUDA events per replay, per call",
    }


def independent_timers(task_source: str, candidate_source: str, name: str, workdir: Path, device: str) -> dict:
    """Both timers for the candidate and the reference of one pair, built as the judge builds them
    (kernelsmith.evaluate.runtime: the same seed before Model and ModelNew), on one input set, and the
    largest difference of their outputs. On the CPU the models are built and compared, the timers
    (CUDA graphs) skipped."""
    try:
        return _timed(task_source, candidate_source, name, workdir, device)
    finally:  # the pair's models, inputs and graphs are gone: give their memory back for the next
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def _timed(task_source: str, candidate_source: str, name: str, workdir: Path, device: str) -> dict:
    task = load_module(task_source, workdir / f"{name}_task.py", f"timing_gpu_task_{name}")
    cand = load_module(candidate_source, workdir / f"{name}_candidate.py", f"timing_gpu_candidate_{name}")
    ref_model = build_model(task.Model, task, 0, device)
    new_model = build_model(cand.ModelNew, task, 0, device)
    inputs = make_inputs(task, 1, device)
    out: dict = {}
    with torch.no_grad():
        want, got = ref_model(*inputs), new_model(*inputs)
        out["max_abs_err"] = float((got.float() - want.float()).abs().max())
        for side, model in (("candidate", new_model), ("reference", ref_model)):
            fn = (lambda m: lambda: m(*inputs))(model)
            out[side] = {}
            for mode, timer in (("warm", warm_ms), ("cold", cold_ms)):
                if device != "cuda":
                    out[side][mode] = {"skipped": "GPU only (CUDA graphs)"}
                    continue
                try:
                    out[side][mode] = timer(fn)
                except Exception as exc:  # noqa: BLE001 - one timer failing leaves the other's figure
                    out[side][mode] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    return out
