#!/usr/bin/env bash
# The Llama decode step end to end, no LLM: capture its operators, seed the norm and SiLU-mul regions
# with our own Triton kernels, tune their launches, hand the best back as a patch and measure the step.
#
#   bash examples/llama_decode/run.sh            # H200 (or any CUDA GPU): decode_step at Llama-3-8B widths
#   DEVICE=cpu bash examples/llama_decode/run.sh # CPU, tiny config, Triton interpreter: speeds relative only
set -euo pipefail
DEVICE=${DEVICE:-cuda}
ITERS=${ITERS:-20}
WORK=${WORK:-llama_decode_work}
KS=${KS:-kernelsmith}
if [ "$DEVICE" = cpu ]; then
  export TRITON_INTERPRET=1
  ENTRY=examples/llama_decode/model.py:tiny_decode_step MIN=0
else
  ENTRY=examples/llama_decode/model.py:decode_step MIN=1
fi

# 1. Where the step's time goes, as tasks at its real shapes.
$KS capture "$ENTRY" --out "$WORK/capture" --device "$DEVICE"
# 2. Seeds of our own for the regions we have kernels for (RMSNorm, add + RMSNorm, SiLU-mul).
${PYTHON:-python3} examples/llama_decode/seeds.py "$WORK/capture" --out "$WORK/seeds"
# 3. Tune each seed's launches (the tuner needs no LLM); an LLM run would be `--model ...` instead.
runs=()
for seed in "$WORK"/seeds/*.py; do
  name=$(basename "$seed" .py)
  $KS evolve "$WORK/capture/$name.py" --seed "$seed" --mutator tune --iterations "$ITERS" \
    --device "$DEVICE" --run-dir "$WORK/runs/$name" ${SMALL:-}
  runs+=("$WORK/runs/$name")
done
# 4. The best kernels as a patch for the model, checked end to end (outputs, and time before/after).
$KS apply "${runs[@]}" --capture "$WORK/capture" --out "$WORK/decode_patch" --device "$DEVICE" --min-speedup "$MIN"
