"""Probe (GPU): where the judge's graph clock spends a batch of 2-us calls, and how much each part
moves from one "go" to the next. Written for issue 54: honest 2-us kernels were flagged
`timing_mismatch` because the harness's cost (~35-45 ms for 4096 calls, measured once in the judge's
process) moved by more than the kernels' own ~8.6 ms in the batch.

For a task and a candidate, in one process, each figure over REPEATS "go"s (min, median, max):
- `harness`: graph_batch.harness_cost (a forward that launches nothing), as the judge measures it;
- `batch`: GraphBatch.go on the candidate (what the judge's clock times in the sandbox);
- phases of one go, each synchronised: refill, weights, L2 reset, replay, the copy back;
- `bare`: the candidate's calls alone replayed from one graph (no checksum between calls);
- `kept`: the calls with every output kept and checksummed once after the batch (stack + one GEMV).

    python3 benchmarks/probes/graph_clock.py TASK CANDIDATE [--calls 4096] [--repeats 8]
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernelsmith.evaluate.checks import flatten_outputs  # noqa: E402
from kernelsmith.evaluate.checksums import checksum_weights  # noqa: E402
from kernelsmith.evaluate.measuring import persisting_l2  # noqa: E402
from kernelsmith.evaluate.measuring.capture import stream_for  # noqa: E402
from kernelsmith.evaluate.measuring.graph_batch import GraphBatch, harness_cost  # noqa: E402
from kernelsmith.evaluate.measuring.timing import Workload  # noqa: E402
from kernelsmith.evaluate.runtime import build_model, make_inputs  # noqa: E402
from kernelsmith.task import load_module  # noqa: E402


def spread(xs: list[float]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "all": [round(x, 4) for x in xs]}


def timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("candidate")
    ap.add_argument("--calls", type=int, default=4096)
    ap.add_argument("--sets", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=8)
    a = ap.parse_args()
    tmp = Path("/tmp/graph_clock_probe")
    tmp.mkdir(exist_ok=True)
    task = load_module(Path(a.task).read_text(), tmp / "task.py", "probe_task")
    cand = load_module(Path(a.candidate).read_text(), tmp / "cand.py", "probe_cand")
    model = build_model(cand.ModelNew, task, 0, "cuda")
    ref = build_model(task.Model, task, 0, "cuda")
    make = lambda s: make_inputs(task, s, "cuda")  # noqa: E731
    torch.set_grad_enabled(False)
    ref_out = ref(*make(0))
    out = {
        "task": a.task,
        "candidate": a.candidate,
        "calls": a.calls,
        "sets": a.sets,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }

    # the judge's harness measurement, repeated
    h = harness_cost(ref_out, make, a.calls, a.sets, 100, goes=a.repeats)[0]
    out["harness_ms"] = spread(h)

    # the sandbox's batch, repeated, and its phases
    work = Workload(lambda inputs: model(*inputs), make)
    batch = GraphBatch(work, a.calls, a.sets)
    batch.go(1, 2)
    walls, phases = [], {"refill": [], "weights": [], "reset": [], "replay": [], "tolist": []}
    for i in range(a.repeats):
        t0 = time.perf_counter()
        batch.go(10 + i, 20 + i)
        walls.append((time.perf_counter() - t0) * 1e3)
    for i in range(a.repeats):
        phases["refill"].append(timed(lambda i=i: batch.work.refill(batch.sets, 50 + i)))
        fresh = checksum_weights(batch.template, 60 + i)
        phases["weights"].append(
            timed(lambda fresh=fresh: [w.copy_(f) for w, f in zip(batch.weights, fresh) if w is not None])
        )
        phases["reset"].append(timed(persisting_l2.reset))
        phases["replay"].append(timed(batch.graph.replay))
        phases["tolist"].append(timed(lambda: batch.sums.tolist()))
    out["batch_ms"] = spread(walls)
    out["phases_ms"] = {k: spread(v) for k, v in phases.items()}
    # interleaved: harness then batch, as pairs (same GPU clocks)
    pairs = []
    for i in range(a.repeats):
        hh = min(harness_cost(ref_out, make, a.calls, a.sets, 200 + i, goes=3)[0])
        t0 = time.perf_counter()
        batch.go(300 + i, 400 + i)
        pairs.append(((time.perf_counter() - t0) * 1e3 - hh) / a.calls * 1e3)
    out["interleaved_per_call_us"] = spread(pairs)

    # the calls alone
    sets = work.sets(a.sets, 0)
    g = torch.cuda.CUDAGraph()
    st = stream_for(lambda: model(*sets[0]))
    with torch.cuda.graph(g, stream=st):
        for k in range(a.calls):
            model(*sets[k % a.sets])
    g.replay()
    out["bare_replay_per_call_us"] = spread([timed(g.replay) / a.calls * 1e3 for _ in range(a.repeats)])
    del g

    # outputs kept, one checksum after the batch
    g2 = torch.cuda.CUDAGraph()
    st = stream_for(lambda: model(*sets[0]))
    leaves0 = flatten_outputs(model(*sets[0]))
    n = sum(x.numel() for x in leaves0)
    w = torch.randn(n, device="cuda", dtype=torch.float32)
    with torch.cuda.graph(g2, stream=st):
        kept = []
        for k in range(a.calls):
            kept.append(
                torch.cat([x.reshape(-1).float() for x in flatten_outputs(model(*sets[k % a.sets]))])
                if len(leaves0) > 1
                else flatten_outputs(model(*sets[k % a.sets]))[0].reshape(-1)
            )
        sums = torch.stack(kept).float() @ w
    g2.replay()
    out["kept_replay_per_call_us"] = spread([timed(g2.replay) / a.calls * 1e3 for _ in range(a.repeats)])
    out["kept_sums_ok"] = bool(torch.isfinite(sums).all())
    out["checksum_variants_per_call_us"] = checksum_variants(leaves0[0], a.calls, a.repeats)
    print(json.dumps(out))


@triton.jit
def _dot_kernel(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x * w, axis=0))


def checksum_variants(leaf: torch.Tensor, calls: int, repeats: int) -> dict:
    """Per call, the harness's checksum alone (no forward) in a graph of `calls`: torch.dot(out=), mm(out=),
    one Triton kernel with atomics into a zeroed slot."""
    x = leaf.reshape(-1)
    w = torch.randn(x.numel(), device="cuda", dtype=torch.float32)
    sums = torch.zeros(calls, 1, device="cuda", dtype=torch.float32)
    xf = x.to(torch.float32)
    block = 4096
    grid = (triton.cdiv(x.numel(), block),)
    variants = {
        "dot_out": lambda k: torch.dot(xf, w, out=sums[k, 0]),
        "mm_out": lambda k: torch.mm(xf.view(1, -1), w.view(-1, 1), out=sums[k : k + 1, 0:1]),
        "triton_atomic": lambda k: _dot_kernel[grid](x, w, sums[k], x.numel(), BLOCK=block),
    }
    res = {}
    for name, fn in variants.items():
        try:
            g = torch.cuda.CUDAGraph()
            st = stream_for(lambda fn=fn: fn(0))
            with torch.cuda.graph(g, stream=st):
                for k in range(calls):
                    fn(k)
            g.replay()
            res[name] = spread([timed(g.replay) / calls * 1e3 for _ in range(repeats)])
            ref = float(xf.double() @ w.double())
            sums.zero_()
            g.replay()
            torch.cuda.synchronize()
            res[name]["rel_err"] = abs(float(sums[1, 0]) - ref) / max(abs(ref), 1e-30)
        except Exception as exc:  # noqa: BLE001 - a probe reports what failed
            res[name] = f"{type(exc).__name__}: {exc}"[:300]
    return res


if __name__ == "__main__":
    main()
