#!/usr/bin/env bash
# One device-tool call for the sandbox's containment on a GPU host (~6 min on the H200): one honest
# evaluation under every layer, every CUDA test (escapes included), the doctor's live check on
# CUDA, and the layers' cost. Runs from a world-readable copy of the tree (a CPU sandbox that
# drops to its own uid must read it; on CUDA there is no uid layer: docs/integrity.md).
# Usage (on the device machine, from the repo root): bash benchmarks/device/containment.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rm -rf /tmp/ks && cp -r . /tmp/ks && chmod -R a+rX /tmp/ks /tmp/site && cd /tmp/ks || exit 1
export PYTHONPATH=/tmp/site:/tmp/ks PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; id; uname -r
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, sys.prefix)"
  ls -ld / /tmp /opt /opt/torch /opt/torch/.venv "$(python3 -c 'import sys; print(sys.base_prefix)')"; command -v bwrap || echo "no bwrap"; } 2>&1 | tee "$OUT/machine.log"
timeout 90 python3 - <<'PY' 2>&1 | grep -v USDT | tee "$OUT/first_eval.log"
from kernelsmith.evaluate import EvalOptions, evaluate
from kernelsmith.task import Task
opts = EvalOptions(device="cuda", timeout=60, trials=2, compile_baseline=False)
r = evaluate(Task.from_file("tests/redteam/tasks/softmax_large_task.py"), open("examples/softmax/triton_softmax.py").read(), opts)
print("FIRST", r.status.value, r.speedup, r.flags, (r.error or "")[-1500:])
print(r.containment)
PY
python3 -m pytest -q -p no:cacheprovider -m cuda tests/evaluate/test_evaluate_cuda.py tests/redteam/test_redteam_cuda.py \
  tests/redteam/test_escapes.py 2>&1 | grep -v USDT | tee "$OUT/pytest_cuda.log" | tail -30
timeout 90 python3 -c "import json; from kernelsmith.evaluate.sandboxing.doctor import checkup; print(json.dumps(checkup('cuda').to_dict(), indent=1))" \
  2>&1 | grep -v USDT | tee "$OUT/doctor.log"
timeout 75 python3 benchmarks/containment_cost.py --device cuda --rounds 1 2>&1 | grep -v USDT | tee "$OUT/containment_cost.log"
