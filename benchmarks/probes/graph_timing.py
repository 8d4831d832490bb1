"""Probe (CUDA): the graph timing harness and the graph batch of the judge's clock, in one process.

For a few serving-size forwards: the harness's device time per call in a CUDA graph, L2 cold and warm,
beside Triton's do_bench_cudagraph (L2 warm, an independent timer of the same mode), the per-call
synced figure and the eager call time. Then forwards that cannot be captured (a host sync, an
unjoined side stream, a forward that replays its own graph) and one that returns the same buffer
every call, and the graph batch: its cost, the harness's own cost, and the judge's verdict.

    python benchmarks/probes/graph_timing.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelsmith.evaluate.measuring import judge_clock, timing  # noqa: E402
from kernelsmith.evaluate.measuring.graph_batch import GraphBatch, harness_cost  # noqa: E402
from kernelsmith.evaluate.options import EvalOptions  # noqa: E402


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * w


CASES = {
    "torch softmax 64x512 f32": (lambda s: [torch.randn(64, 512, device="cuda")], lambda x: torch.softmax(x[0], -1)),
    "triton softmax 64x512 f32": (lambda s: [torch.randn(64, 512, device="cuda")], lambda x: triton_softmax(x[0])),
    "triton softmax 4096x8192 f32": (
        lambda s: [torch.randn(4096, 8192, device="cuda")],
        lambda x: triton_softmax(x[0]),
    ),
    "rmsnorm 1x4096 bf16 (torch ops)": (
        lambda s: [torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)],
        lambda x: rmsnorm(x[0], W4096),
    ),
    "gemv 1x4096x4096 bf16": (
        lambda s: [torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)],
        lambda x: x[0] @ M4096,
    ),
}


def make(fn):
    def inner(seed: int):
        torch.manual_seed(seed)
        return fn(seed)

    return inner


def row(name: str, fn_make, forward, opts: EvalOptions) -> dict:
    work = timing.Workload(forward, make(fn_make))
    cold = timing.measure(work, opts, 1)
    warm = timing.measure(work, opts.model_copy(update={"l2": "warm"}), 2)
    synced = timing.synced(work, opts, timing.L2Flusher("cuda"), 3)
    x = work.make(4)
    dbcg = [triton.testing.do_bench_cudagraph(lambda: forward(x), rep=50, return_mode="median") for _ in range(3)]
    out = {
        "case": name,
        "cold_us": cold.device.median_ms * 1e3,
        "cold_spread": cold.device.spread,
        "cold_calls": cold.device.calls,
        "warm_us": warm.device.median_ms * 1e3,
        "warm_spread": warm.device.spread,
        "dbcg_us": [d * 1e3 for d in dbcg],
        "synced_us": synced.median_ms * 1e3,
        "eager_us": cold.eager.median_ms * 1e3,
        "fallback": cold.fallback,
        "method": cold.device.method,
        "kernels_per_call": sum(cold.activity.kernels.values()) / max(cold.recorded_calls, 1)
        if cold.activity
        else None,
    }
    out["warm_vs_dbcg"] = out["warm_us"] / statistics.median(out["dbcg_us"])
    return out


def failure_cases(opts: EvalOptions) -> list[dict]:
    rows = []
    side = torch.cuda.Stream()

    def host_sync(x):
        y = torch.softmax(x[0], -1)
        float(y.sum())  # a host sync inside forward
        return y

    def unjoined(x):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            return torch.softmax(x[0], -1)  # never joined back

    buf = {}

    def same_buffer(x):
        out = buf.setdefault("out", torch.empty_like(x[0]))
        _softmax_kernel[(x[0].shape[0],)](out, x[0], x[0].shape[1], BLOCK=512)
        return out

    for name, fwd in (
        ("host sync", host_sync),
        ("unjoined side stream", unjoined),
        ("same output buffer", same_buffer),
    ):
        work = timing.Workload(fwd, make(lambda s: [torch.randn(64, 512, device="cuda")]))
        try:
            m = timing.measure(work, opts, 10, keep=lambda o: o.clone())
            ref = torch.softmax(work.make(m.last_seed)[0], -1)
            ok = torch.allclose(m.last_output, ref, atol=1e-5)
            rows.append(
                {
                    "case": name,
                    "method": m.device.method,
                    "fallback": m.fallback,
                    "last_ok": ok,
                    "us": m.device.median_ms * 1e3,
                }
            )
        except Exception as exc:  # noqa: BLE001
            rows.append({"case": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        torch.cuda.synchronize()
    return rows


def batch_case() -> dict:
    work = timing.Workload(lambda x: triton_softmax(x[0]), make(lambda s: [torch.randn(64, 512, device="cuda")]))
    cand_ms = timing.measure(work, EvalOptions(device="cuda"), 20).device.median_ms
    calls = judge_clock.graph_batch_calls(cand_ms)
    sets = judge_clock.graph_batch_sets(calls, 64 * 512 * 4)
    t0 = time.perf_counter()
    batch = GraphBatch(work, calls, sets)
    capture_s = time.perf_counter() - t0
    walls = []
    for i in range(4):
        t0 = time.perf_counter()
        sums = batch.go(100 + i, 200 + i)
        walls.append((time.perf_counter() - t0) * 1e3)
    ref = torch.softmax(work.make(100 + 3 + 1 + 5 % sets)[0], -1)
    w = __import__("kernelsmith.evaluate.checksums", fromlist=["x"]).checksum_weights([ref], 203)[0]
    expect = float(torch.dot(ref.reshape(-1), w))
    costs, harness = harness_cost(torch.softmax(work.make(0)[0], -1), work.make, calls, sets, 300, goes=3)
    cost_ms = min(costs)
    act = batch.record("cuda")
    v = judge_clock.judge("cuda", "graph", cand_ms, min(walls), calls, cost_ms, max(costs))
    return {
        "cand_us": cand_ms * 1e3,
        "calls": calls,
        "sets": sets,
        "capture_s": capture_s,
        "walls_ms": walls,
        "harness_ms": costs,
        "judge_per_call_us": v.per_call_ms * 1e3,
        "bound_us": v.bound_ms * 1e3,
        "mismatch": v.mismatch,
        "checksum_call5": [sums[5][0], expect],
        "replay_kernels": dict(act.kernels),
        "harness_kernels": dict(harness.kernels),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    global W4096, M4096
    W4096 = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    M4096 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    opts = EvalOptions(device="cuda")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    report: dict = {"rows": [], "failures": None, "batch": None}
    for name, (mk, fwd) in CASES.items():
        try:
            r = row(name, mk, fwd, opts)
        except Exception as exc:  # noqa: BLE001
            r = {"case": name, "error": f"{type(exc).__name__}: {exc}"[:400]}
        report["rows"].append(r)
        print(json.dumps(r), flush=True)
    report["failures"] = failure_cases(opts)
    print(json.dumps(report["failures"]), flush=True)
    try:
        report["batch"] = batch_case()
    except Exception:  # noqa: BLE001
        import traceback

        report["batch"] = {"error": traceback.format_exc()[-1500:]}
    print(json.dumps(report["batch"]), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe_graph_timing.json").write_text(json.dumps(report, indent=1))


W4096 = M4096 = None

if __name__ == "__main__":
    main()
