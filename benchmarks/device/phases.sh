#!/usr/bin/env bash
# Issue 56 on a GPU, one device call (~5 min): where an evaluation's time goes (benchmarks/eval_phases.py):
# sandboxes forked from the judge's template with the warm evaluations queued at once (a search's path:
# each loaded ahead while the one before it is judged, judging/ahead.py), one after another, and, with
# SPAWNED=1, spawned (KERNELSMITH_SANDBOX_TEMPLATE=0) for comparison.
# Under $OUT: queued/, forked/ (spawned/) with eval_phases.json, a log each, machine.log. Carry .whl.
# Usage: bash benchmarks/device/phases.sh [WARM]   (TASKS=a,b: benchmarks/tasks names, default tiny_add,tiny_softmax:
# a region's size, loaded ahead; the KernelBench-size softmax and rmsnorm, 6-7.5 GB, never are; EACH=seconds a mode)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
WARM=${1:-10}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format='commit %h %s' 2>/dev/null; } | tee "$OUT/machine.log"
modes="queued forked"; [ "${SPAWNED:-0}" = 1 ] && modes="$modes spawned"
for mode in $modes; do
  flag=1; [ "$mode" = spawned ] && flag=0
  extra=""; [ "$mode" = queued ] && extra="--queued"
  KERNELSMITH_SANDBOX_TEMPLATE=$flag timeout "${EACH:-200}" python3 benchmarks/eval_phases.py --device cuda \
    --out "$OUT/$mode" --warm "$WARM" --starts 3 --tasks "${TASKS:-tiny_add,tiny_softmax}" $extra 2>&1 | grep -v USDT > "$OUT/$mode.log"
  echo "== $mode exit ${PIPESTATUS[0]}"; grep -A14 "^# " "$OUT/$mode.log" | head -22
done
