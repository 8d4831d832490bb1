#!/usr/bin/env bash
# The Llama decode step made faster in one command, no LLM: `kernelsmith optimize` captures its operators,
# starts the norm, add + norm, SiLU-mul and rotary regions from our own Triton kernels (seeds.py: seed_for
# writes one for a captured task), the others from torch.compile's code on a GPU, tunes each region's
# launches for its share of the budget, writes the patch and checks it end to end.
#
#   bash examples/llama_decode/run.sh            # H200 (or any CUDA GPU): decode_step at Llama-3-8B widths
#   DEVICE=cpu bash examples/llama_decode/run.sh # CPU, tiny config, Triton interpreter: speeds relative only
#
# BUDGET: the search time (20m); ITERS: at most this many iterations per region (default: as many as the
# budget allows); MODES: how the patch is checked ("eager"; on a GPU also "compile graphs"); WORK: the work
# directory (rerun the same command to resume it; a larger BUDGET goes on with the searches).
# kernelsmith is the one on PATH (an activated venv), else the project's own .venv/bin/kernelsmith; KS
# names another.
set -euo pipefail
DEVICE=${DEVICE:-cuda}
BUDGET=${BUDGET:-20m}
MODES=${MODES:-eager}
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
if [ "$DEVICE" = cpu ]; then
  ENTRY=$HERE/model.py:tiny_decode_step
else
  ENTRY=$HERE/model.py:decode_step
fi
modes=()
for mode in $MODES; do modes+=(--mode "$mode"); done

"$KS" optimize "$ENTRY" --out "$WORK" --device "$DEVICE" --budget "$BUDGET" --seeds "$HERE/seeds.py:seed_for" \
  "${modes[@]}" ${ITERS:+--iterations "$ITERS"}
