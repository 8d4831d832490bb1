#!/usr/bin/env bash
# The Llama decode step end to end, no LLM: capture its operators, seed the norm and SiLU-mul regions
# with our own Triton kernels, tune their launches, hand the best back as a patch and measure the step.
#
#   bash examples/llama_decode/run.sh            # H200 (or any CUDA GPU): decode_step at Llama-3-8B widths
#   DEVICE=cpu bash examples/llama_decode/run.sh # CPU, tiny config, Triton interpreter: speeds relative only
#
# kernelsmith is the one on PATH (an activated venv), else the project's own .venv/bin/kernelsmith; KS
# and PYTHON (the interpreter for seeds.py, which needs torch) name others.
set -euo pipefail
DEVICE=${DEVICE:-cuda}
ITERS=${ITERS:-20}
WORK=${WORK:-llama_decode_work}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${KS:-}" ]; then
  if command -v kernelsmith >/dev/null; then
    KS=kernelsmith
  elif [ -x "$HERE/../../.venv/bin/kernelsmith" ]; then
    KS="$HERE/../../.venv/bin/kernelsmith"
  else
    echo "run.sh: no kernelsmith on PATH nor in $(cd "$HERE/../.." && pwd)/.venv: activate the project's venv" \
      "(source .venv/bin/activate), install it (pip install -e .), or name it with KS=/path/to/kernelsmith" >&2
    exit 2
  fi
fi
# seeds.py needs torch: the Python beside kernelsmith, where there is one
KS_BIN=$(dirname "$(command -v "$KS")")
PYTHON=${PYTHON:-$([ -x "$KS_BIN/python" ] && echo "$KS_BIN/python" || echo python3)}
if [ "$DEVICE" = cpu ]; then
  export TRITON_INTERPRET=1
  ENTRY=$HERE/model.py:tiny_decode_step MIN=0
else
  ENTRY=$HERE/model.py:decode_step MIN=1
fi

# 1. Where the step's time goes, as tasks at its real shapes.
"$KS" capture "$ENTRY" --out "$WORK/capture" --device "$DEVICE"
# 2. Seeds of our own for the regions we have kernels for (RMSNorm, add + RMSNorm, SiLU-mul).
"$PYTHON" "$HERE/seeds.py" "$WORK/capture" --out "$WORK/seeds"
# 3. Tune each seed's launches (the tuner needs no LLM); an LLM run would be `--model ...` instead.
runs=()
for seed in "$WORK"/seeds/*.py; do
  name=$(basename "$seed" .py)
  "$KS" evolve "$WORK/capture/$name.py" --seed "$seed" --mutator tune --iterations "$ITERS" \
    --device "$DEVICE" --run-dir "$WORK/runs/$name" ${SMALL:-}
  runs+=("$WORK/runs/$name")
done
# 4. The best kernels as a patch for the model, checked end to end (outputs, and time before/after).
"$KS" apply "${runs[@]}" --capture "$WORK/capture" --out "$WORK/decode_patch" --device "$DEVICE" --min-speedup "$MIN"
