#!/usr/bin/env bash
# One device-tool call for the evaluation service: direct `kernelsmith eval` against
# `kernelsmith serve` with the local and the Ray backend, on one GPU (benchmarks/serve_gpu.py).
# Carry `.whl-serve` (pydantic, FastAPI, uvicorn, a Core-only Ray wheel made with
# benchmarks/strip_ray_wheel.py: see docs/benchmarks.md, "Running the device scripts").
# Usage (on the device machine, from the repo root): bash benchmarks/device/serve.sh [N_SERVICE]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-serve/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
python3 benchmarks/serve_gpu.py --device cuda --out "$OUT" --direct 6 --service "${1:-16}" --clients 4 2>&1 | tee "$OUT/serve_gpu.log"
rm -rf "$OUT/candidates"
