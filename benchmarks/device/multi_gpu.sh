#!/usr/bin/env bash
# Device-tool calls on a machine with several GPUs (nvidia-h200-x2, -x4 or -x8), for
# benchmarks/multi_gpu.py. Carry `.whl-serve` (Ray and the service's wheels) and `.whl` (libcst
# for the tuner): docs/benchmarks.md, "Running the device scripts". Two calls fit the 10-minute limit:
#   bash benchmarks/device/multi_gpu.sh scaling   # throughput 1..8 GPUs (local, Ray), interference
#   bash benchmarks/device/multi_gpu.sh suite     # tuner over the bundled suite, one worker per GPU
# Nothing here uses NCCL or NVLink: each GPU has its own judge process, and they share nothing.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl-serve/*.whl .whl/libcst-*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi -L
case "${1:-scaling}" in
  scaling) python3 benchmarks/multi_gpu.py --out "$OUT" --skip suite --per-worker 6 2>&1 | tee "$OUT/multi_gpu_scaling.log" ;;
  suite) python3 benchmarks/multi_gpu.py --out "$OUT" --skip scaling,interference --suite-iterations 8 2>&1 | tee "$OUT/multi_gpu_suite.log"
         rm -rf "$OUT/runs" ;;
  *) echo "usage: $0 scaling|suite" >&2; exit 2 ;;
esac
