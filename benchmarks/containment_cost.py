"""What the containment layers cost an evaluation, and whether they move a speedup: the same
honest candidates evaluated with KERNELSMITH_SANDBOX=none and with every layer the host allows,
alternating, one pool per round (the judge reads the setting when it starts).

    python3 benchmarks/containment_cost.py --device cuda [--rounds 2]   # one JSON line per evaluation
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAIRS = [
    (REPO / "tests/redteam/tasks/softmax_large_task.py", REPO / "examples/softmax/triton_softmax.py"),
    (
        REPO / "benchmarks/kernelbench/problems/level1/19_ReLU.py",
        REPO / "benchmarks/kernelbench/candidates/level1/19_ReLU.py",
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    opts = EvalOptions(device=args.device, timeout=120.0, compile_baseline=False)
    for rnd in range(args.rounds):
        for mode in ("none", "auto"):
            os.environ["KERNELSMITH_SANDBOX"] = mode
            t0 = time.monotonic()
            with EvalPool(device=args.device, workers=1, options=opts) as pool:
                for task, cand in PAIRS:
                    r = pool.evaluate(Task.from_file(task), cand.read_text(), opts)
                    layers = [k for k, v in (r.containment or {}).get("layers", {}).items() if v.startswith("on")]
                    print(
                        json.dumps(
                            {
                                "round": rnd,
                                "mode": mode,
                                "task": task.stem,
                                "status": r.status.value,
                                "flags": [str(f) for f in r.flags],
                                "speedup": r.speedup,
                                "candidate_ms": r.candidate_ms,
                                "reference_ms": r.reference_ms,
                                "seconds": r.stages.total,
                                "worker_wait": r.stages.worker_wait,
                                "layers": layers,
                            }
                        ),
                        flush=True,
                    )
            print(json.dumps({"round": rnd, "mode": mode, "pool_seconds": time.monotonic() - t0}), flush=True)


if __name__ == "__main__":
    main()
