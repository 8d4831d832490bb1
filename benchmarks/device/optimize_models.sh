#!/usr/bin/env bash
# Issue 54 on a GPU, one device call per model (~5-9 min each; the ViT's 2-minute budget ran past 280 s on the
# H100 on 2026-12-07: capture, seeds and the three modes' check come on top of the budget): `kernelsmith
# optimize` as a new user runs it, on models the
# repo never saw (benchmarks/device/models/half_models.py: a ViT in fp16 and a GPT-2 in bf16, random
# weights), in the three modes (the default on CUDA), a 2-minute budget each. Under $OUT: MODEL.log (optimize's own lines) and
# MODEL.json (optimize's record). Carry .whl. Usage: bash benchmarks/device/optimize_models.sh [MODEL ...]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-2m}
LIMIT=${LIMIT:-560}  # seconds a model, under the device's 10-minute call
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"; } | tee "$OUT/machine.log"
for model in "${@:-vit_fp16 gpt2_bf16}"; do
  for m in $model; do
    start=$SECONDS
    timeout "$LIMIT" python3 -m kernelsmith optimize "benchmarks/device/models/half_models.py:$m" --device cuda \
      --budget "$BUDGET" --out "/tmp/opt_$m" 2>&1 \
      | grep -v -i "USDT\|warn" > "$OUT/$m.log"
    rc=${PIPESTATUS[0]}
    echo "== optimize $m exit $rc $(( SECONDS - start ))s" | tee -a "$OUT/$m.log"
    tail -12 "$OUT/$m.log"
    cp /tmp/opt_$m/optimize.json "$OUT/$m.json" 2>/dev/null || ls /tmp/opt_$m
  done
done
