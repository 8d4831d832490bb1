#!/usr/bin/env bash
# One device-tool call for the search: install carried wheels (pydantic, openai and their
# dependencies: see docs/benchmarks.md), run a short evolve with CUDA timing against a scripted
# LLM started in the same command, then the engine-overhead benchmark.
# Usage (on the device machine, from the repo root): bash benchmarks/device/evolve.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 benchmarks/evolve_gpu.py --out "$OUT" --iterations "${KS_EVOLVE_ITERATIONS:-8}" 2>&1 | tee "$OUT/evolve_gpu.log" | tail -40
python3 benchmarks/engine_overhead.py --device cuda --out "$OUT" --iterations 40 2>&1 | tee "$OUT/engine_overhead.log"
