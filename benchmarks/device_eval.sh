#!/usr/bin/env bash
# One device-tool call: install carried wheels, show the machine, run the CUDA tests and the
# CUDA red-team verdicts and the evaluation benchmark. Usage (on the device machine, from the repo root): bash benchmarks/device_eval.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pytest -q -p no:cacheprovider ${KS_CUDA_TESTS:-tests} -m cuda 2>&1 | tee "$OUT/pytest_cuda.log" | tail -15
python3 benchmarks/redteam_cuda.py --out "$OUT" 2>&1 | tee "$OUT/redteam_cuda.log"
python3 benchmarks/eval_gpu.py --out "$OUT" "$@" 2>&1 | tee "$OUT/eval_gpu.log"
