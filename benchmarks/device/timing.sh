#!/usr/bin/env bash
# Issue 28's measurement, one device-tool call (~8.5 min on the H200; benchmarks/timing_gpu.py stops
# starting kernels at --deadline, 500 s by default): install the carried wheels, show the machine, then
# the verdicts' device times at serving sizes against independent timers, KernelBench level-1 spread
# and speedups, and `kernelsmith eval` three times in a row. The table comes last.
# Usage (on the device machine, from the repo root, with .whl carried):
#   bash benchmarks/device/timing.sh [timing_gpu.py flags, e.g. --evals 4 --no-cli]
# $OUT gets machine.log, timing_gpu.log, timing_gpu.json, verdicts.jsonl and table.txt.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee "$OUT/machine.log"
python3 benchmarks/timing_gpu.py --out "$OUT" "$@" 2>&1 | grep --line-buffered -v USDT | tee "$OUT/timing_gpu.log"
