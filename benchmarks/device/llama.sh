#!/usr/bin/env bash
# Issue 31 on the H200, one device-tool call (~8 min): capture the Llama decode step (Llama-3-8B widths,
# bf16, batch 1; transformers from the image) and the batch-32 step, then examples/llama_decode/run.sh on
# CUDA: seeds of our own, tuned, applied, and the step's time before and after. Five files under $OUT; every written task's reference is run on the GPU.
# Usage (on the device machine, from the repo root; carry .whl): bash benchmarks/device/llama.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
WORK=/tmp/llama_work
mkdir -p "$OUT"
KS="python3 -m kernelsmith"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"; } | tee "$OUT/machine.log"
$KS capture examples/llama_decode/model.py:decode_step_b32 --out "$WORK/capture_b32" --device cuda 2>&1 | grep -v -i "USDT\|warn\|forward_call" | tee "$OUT/capture_b32.log" | tail -5
WORK=$WORK KS=$KS ITERS=${ITERS:-10} timeout 460 bash examples/llama_decode/run.sh 2>&1 | grep -v -i "USDT\|warn\|forward_call" \
  | grep -v "^\[ *[0-9]*/" > "$OUT/run.log"; tail -40 "$OUT/run.log"
cp "$WORK/capture/capture.json" "$OUT/capture_b1.json" 2>/dev/null
# Every written task loads and its reference runs on the GPU, as the evaluator builds and runs it.
python3 - "$WORK/capture" "$WORK/capture_b32" <<'PY' 2>&1 | grep -v USDT | tee -a "$OUT/capture_b32.log"
import sys, torch
from pathlib import Path
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.task import Task, load_module
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
for folder in sys.argv[1:]:
    ok, bad = 0, []
    for path in sorted(p for p in Path(folder).glob("*.py") if not p.stem.endswith("_seed")):
        try:
            task = Task.from_file(path)
            module = load_module(task.source, path, f"_ref_{path.stem}")
            model = build_model(module.Model, module, 0, DEVICE)
            with torch.no_grad():
                model(*make_inputs(module, 0, DEVICE))
            torch.cuda.synchronize() if DEVICE == "cuda" else None
            ok += 1
        except Exception as exc:
            bad.append(f"{path.name}: {type(exc).__name__}: {exc}")
    print(f"{folder}: {ok} tasks' references ran on {DEVICE}; failed: {bad or 'none'}")
PY
cp "$WORK/decode_patch/apply.json" "$OUT/apply.json" 2>/dev/null
python3 -c "import json; d=json.load(open('$OUT/capture_b1.json')); print('covered', d['covered_share'], 'total_us', d['total_us'])"
