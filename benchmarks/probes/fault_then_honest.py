"""Probe (GPU host): after a candidate faults (illegal address), do the next evaluations on the
same pool still succeed, per containment layer set? One JSON line per evaluation.

Found on the H200 (2026-12-03): with procmask + Landlock + seccomp the two evaluations after an
illegal address came back runtime_error (tests/evaluate/test_evaluate_cuda.py).

    python3 benchmarks/probes/fault_then_honest.py [LAYERS ...]   # e.g. "procmask,landlock,seccomp" none
"""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelsmith.evaluate import EvalOptions, EvalPool  # noqa: E402
from kernelsmith.task import Task  # noqa: E402

TASK = Task.from_file(ROOT / "examples/softmax/task.py")
HONEST = (ROOT / "examples/softmax/triton_softmax.py").read_text()
OUT_OF_BOUNDS = HONEST.replace(
    "tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)",
    "tl.store(out_ptr + row * out_row_stride + cols + (1 << 40), y, mask=mask)",
)
assert OUT_OF_BOUNDS != HONEST

for layers in sys.argv[1:] or ["procmask,landlock,seccomp"]:
    if layers == "none":
        os.environ["KERNELSMITH_SANDBOX"] = "none"
    else:
        os.environ.pop("KERNELSMITH_SANDBOX", None)
        os.environ["KERNELSMITH_SANDBOX_LAYERS"] = layers
    opts = EvalOptions(device="cuda", timeout=120, trials=2, compile_baseline=False)
    with EvalPool(device="cuda", workers=1, options=opts) as pool:
        for name, code in [
            ("honest", HONEST),
            ("out_of_bounds", OUT_OF_BOUNDS),
            ("honest", HONEST),
            ("honest", HONEST),
            ("honest", HONEST),
        ]:
            r = pool.evaluate(TASK, code, opts)
            print(
                json.dumps(
                    {"layers": layers, "candidate": name, "status": r.status.value, "error": (r.error or "")[-700:]}
                ),
                flush=True,
            )
