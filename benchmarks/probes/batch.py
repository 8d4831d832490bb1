"""Probe (H200): what one call costs in the judge-timed batch (refill, forward, checksum, no sync
between calls), per candidate, with and without the activity recorder; and the host time of
forward alone. Written to find why an honest side-stream softmax joined back by an event measured
0.77 ms a call on the judge's clock against 0.09 ms on CUDA events.

    python3 benchmarks/probes/batch.py TASK CANDIDATE [CANDIDATE ...]   # one JSON line per finding
"""

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernelsmith.evaluate.checks import flatten_outputs  # noqa: E402
from kernelsmith.evaluate.checksums import checksum_weights, weighted_checksums  # noqa: E402
from kernelsmith.evaluate.measuring.activity import ActivityRecorder  # noqa: E402
from kernelsmith.evaluate.runtime import build_model, make_inputs, refill_inputs  # noqa: E402
from kernelsmith.task import load_module  # noqa: E402

CALLS = 50


def batch(model, task, inputs, weights, refill: bool, checksum: bool) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(CALLS):
        if refill:
            refill_inputs(task, inputs, 100 + k, "cuda")
        with torch.no_grad():
            leaves = flatten_outputs(model(*inputs))
        if checksum:
            weighted_checksums(leaves, weights)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / CALLS


def main() -> None:
    task_path, cands = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    task = load_module(task_path.read_text(), task_path, "task_probe")
    for cand in cands:
        mod = load_module(cand.read_text(), cand, "cand_" + cand.stem)
        model = build_model(mod.ModelNew, task, 0, "cuda")
        inputs = make_inputs(task, 0, "cuda")
        with torch.no_grad():
            weights = checksum_weights(flatten_outputs(model(*inputs)), 7)
        for _ in range(3):
            batch(model, task, inputs, weights, True, True)
        row = {"candidate": cand.stem}
        for refill, checksum in ((False, False), (True, False), (True, True)):
            key = f"{'refill+' if refill else ''}{'checksum+' if checksum else ''}forward"
            row[key + "_ms"] = min(batch(model, task, inputs, weights, refill, checksum) for _ in range(3))
            with ActivityRecorder("cuda") as rec:
                row[key + "_recorded_ms"] = min(batch(model, task, inputs, weights, refill, checksum) for _ in range(3))
            row["recorded_kernels"] = rec.activity.kernels.total()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(CALLS):
                model(*inputs)
        row["forward_host_ms"] = (time.perf_counter() - t0) * 1e3 / CALLS
        torch.cuda.synchronize()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
