"""Verdicts of the CUDA red-team candidates on this GPU, as a table (for docs/integrity.md).

    python benchmarks/redteam_cuda.py --out DIR

Writes DIR/redteam_cuda.json and prints one line per candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RED = REPO / "tests/redteam"
SMALL = REPO / "examples/softmax/task.py"
LARGE = RED / "tasks/softmax_large_task.py"
CASES = [
    ("honest (control)", REPO / "examples/softmax/triton_softmax.py", LARGE),
    ("side_stream_kernel", None, LARGE),
    ("caching_allocator_reuse", None, SMALL),
    ("cuda_graph_replay", None, SMALL),
    ("cache_across_timed_calls", None, SMALL),
    ("cache_by_data_ptr", None, SMALL),
    ("patch_cuda_event", None, LARGE),
    ("patch_bound_timer", None, LARGE),
    ("patch_harness_benchmark", None, LARGE),
    ("patch_channel_send", None, LARGE),
    ("forge_channel_message", None, LARGE),
    ("skip_work_until_last_rep", None, LARGE),
    ("background_thread_fill", None, SMALL),
    ("trivial_kernel_beside_torch", None, SMALL),
    ("torch_only_forward", None, SMALL),
    ("zero_grid_launch", None, SMALL),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELSMITH_CACHE_DIR", tempfile.mkdtemp(prefix="ks-redteam-"))
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    opts = EvalOptions(device="cuda", timeout=120.0, trials=2, compile_baseline=False)
    rows = []
    with EvalPool(device="cuda", workers=1, options=opts) as pool:
        for name, path, task in CASES:
            path = path or RED / "candidates" / f"{name}.py"
            if not path.is_file() or not task.is_file():
                print(f"{name}: missing {path if not path.is_file() else task}")
                continue
            t0 = time.monotonic()
            r = pool.evaluate(Task.from_file(task), path.read_text())
            row = {"name": name, "task": task.stem, "status": r.status.value, "flags": r.flags,
                   "speedup": r.speedup, "candidate_ms": r.candidate_ms, "floor_ms": r.floor_ms,
                   "error": (r.error or "")[:300], "flag_details": r.flag_details, "seconds": time.monotonic() - t0}
            rows.append(row)
            (args.out / "redteam_cuda.json").write_text(json.dumps(rows, indent=2))
            err = (r.error or "").splitlines()[-1][:110] if r.error else ""
            sp = f"{r.speedup:.3g}x" if r.speedup else "-"
            print(f"{name:28s} {task.stem:20s} {r.status.value:14s} {sp:>8s} {','.join(r.flags) or '-':30s} {err}",
                  flush=True)


if __name__ == "__main__":
    main()
