#!/usr/bin/env bash
# One device-tool call (~5 min on the H200) that finds what each containment layer does to CUDA:
# the Landlock parts one by one (benchmarks/probes/landlock_cuda.py), an honest evaluation under
# each in-process layer alone and together, and the escape set under the layers applied after
# CUDA is up. Runs from a world-readable copy of the tree (the uid layer needs to read it).
# Usage (on the device machine, from the repo root): bash benchmarks/device/probe_layers.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rm -rf /tmp/ks && cp -r . /tmp/ks && chmod -R a+rX /tmp/ks /tmp/site && cd /tmp/ks || exit 1
export PYTHONPATH=/tmp/site:/tmp/ks PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; id; uname -r
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; ls -l /dev | grep -i nvidia; } 2>&1 | tee "$OUT/machine.log"
timeout 240 python3 benchmarks/probes/landlock_cuda.py 2>&1 | grep -v USDT | tee "$OUT/probe_landlock.log"
for layers in ${KS_PROBE_LAYERS:-landlock procmask,landlock,seccomp}; do
  [ -n "$layers" ] || continue
  echo "## layers $layers" | tee -a "$OUT/layers_eval.log"
  KERNELSMITH_SANDBOX_LAYERS=$layers timeout 100 python3 - <<'PY' 2>&1 | grep -v USDT | tail -12 | tee -a "$OUT/layers_eval.log"
from kernelsmith.evaluate import EvalOptions, evaluate
from kernelsmith.task import Task
opts = EvalOptions(device="cuda", timeout=60, trials=2, compile_baseline=False)
r = evaluate(Task.from_file("tests/redteam/tasks/softmax_large_task.py"), open("examples/softmax/triton_softmax.py").read(), opts)
print("EVAL", r.status.value, r.speedup, r.flags, r.containment, (r.error or "")[-800:])
PY
done
KS_CUDA_LAYERS=${KS_CUDA_LAYERS:-procmask,landlock,seccomp} timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/redteam/test_escapes.py \
  2>&1 | grep -v USDT | tee "$OUT/escapes_cuda.log" | tail -30
KERNELSMITH_SANDBOX_LAYERS=${KS_CUDA_LAYERS:-procmask,landlock,seccomp} timeout 90 python3 -c "import json; from kernelsmith.evaluate.sandboxing.doctor import checkup; print(json.dumps(checkup('cuda').to_dict(), indent=1))" \
  2>&1 | grep -v USDT | tee "$OUT/doctor.log"
