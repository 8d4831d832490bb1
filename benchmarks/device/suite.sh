#!/usr/bin/env bash
# One device-tool call: the tuner over the bundled suite on the GPU (issue: tuner and suite).
# Resumable: if the call runs out of time, the same command continues every run where it stopped
# (runs/ is kept between calls while the machine stays warm).
# Usage (on the device machine, from the repo root): bash benchmarks/device/suite.sh [ITERATIONS]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m kernelsmith.cli bench examples/suite --solutions examples/suite_seeds --device cuda --json \
  2>&1 | tee "$OUT/suite_seeds.log" | tail -1 > "$OUT/suite_seeds.json"
python3 -m kernelsmith.cli evolve-suite examples/suite --seeds examples/suite_seeds --mutator tune \
  --iterations "${1:-12}" --device cuda --runs-dir runs/suite-tune 2>&1 | tee "$OUT/suite_tune.log" | tail -40
cp runs/suite-tune/suite_report.json "$OUT/" 2>/dev/null
