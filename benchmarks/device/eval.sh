#!/usr/bin/env bash
# The GPU gate on a device machine: install carried wheels, show the machine, run every CUDA test
# (the escape set included), the verdict gate (red-team cases, KernelBench level-1 kernels and
# level-2 partial replacements at their real sizes) and the doctor's live check on CUDA.
# Graph-timed verdicts take ~5-9 s each on the H200, so the whole gate is ~13 min: more than one
# device call. KS_GATE_PHASE=pytest runs the CUDA tests only, KS_GATE_PHASE=gate the verdict gate and
# the doctor; unset, both (for a machine without the 10-minute limit). KernelBench's few-shot CUDA
# C++ examples build for ~60 s each: run them with KS_GATE_GROUPS=few_shot.
# Usage (on the device machine, from the repo root): KS_GATE_PHASE=pytest bash benchmarks/device/eval.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
PHASE=${KS_GATE_PHASE:-all}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format='commit %h %s' 2>/dev/null; } | tee "$OUT/machine.log"
if [ "$PHASE" = pytest ] || [ "$PHASE" = all ]; then
  python3 -m pytest -q -p no:cacheprovider -m cuda --durations=8 \
    ${KS_CUDA_TESTS:-tests/evaluate/test_evaluate_cuda.py tests/redteam/test_redteam_cuda.py tests/redteam/test_escapes.py tests/seed/test_seed_cuda.py tests/apply/test_apply_eager.py} \
    2>&1 | grep -v USDT | tee "$OUT/pytest_cuda.log" | tail -30
fi
if [ "$PHASE" = gate ] || [ "$PHASE" = all ]; then
  python3 benchmarks/device/redteam_cuda.py --out "$OUT" --group ${KS_GATE_GROUPS:-redteam kernelbench} 2>&1 | grep -v USDT | tee "$OUT/gate.log"
  timeout 90 python3 -c "import json; from kernelsmith.evaluate.sandboxing.doctor import checkup; print(json.dumps(checkup('cuda').to_dict(), indent=1))" \
    2>&1 | grep -v USDT | tee "$OUT/doctor.log" | tail -60
fi
