#!/usr/bin/env bash
# Issue 42 on a GPU, one device-tool call per batch (~8 min each): the Llama decode step (Llama-3-8B
# widths, 2 layers, bf16; transformers from the image) at batch B is captured, our own seeds
# (examples/llama_decode/seeds.py) are tuned ITERS iterations each, and `kernelsmith apply` checks the
# patch eager, compiled (torch.compile) and compiled with CUDA graphs (mode="reduce-overhead"), each mode
# against the same mode without the patch: outputs, graph breaks, the regions each kernel took, and the
# step's device time and wall time before -> after with their min-max spreads (REPS forwards each).
# Under $OUT: machine.log, capture_bB.log, tune_bB.log, apply_bB.log (apply's own lines), apply_bB.json,
# summary_bB.log (one line per mode and measure).
# Usage (on the device machine, from the repo root; carry .whl, as benchmarks/device/llama.sh does):
#   bash benchmarks/device/patch_modes.sh 1      # batch 1 (decode_step)
#   bash benchmarks/device/patch_modes.sh 32     # batch 32 (decode_step_b32), a second call
# ITERS (tuner iterations per kernel, 6), REPS (forwards per measure, 20), MIN (--min-speedup: the kernels
# whose verdict beats eager, 1), MODES ("eager compile graphs"), TUNE_LIMIT (s per seed's tuning, 90) and
# DEADLINE (s from the start by which apply must end; unset: apply may take 330 s) override.
set -u
BATCH=${1:-1}
case "$BATCH" in
  1) ENTRY=examples/llama_decode/model.py:decode_step ;;
  32) ENTRY=examples/llama_decode/model.py:decode_step_b32 ;;
  *) echo "patch_modes.sh: batch 1 or 32, not '$BATCH'" >&2; exit 2 ;;
esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
WORK=/tmp/patch_modes/b$BATCH
ITERS=${ITERS:-6}
REPS=${REPS:-20}
MIN=${MIN:-1}
MODES=${MODES:-"eager compile graphs"}
TUNE_LIMIT=${TUNE_LIMIT:-90}   # seconds each seed's tuning may take
# apply's limit: 330 s, or what is left of DEADLINE (seconds from the start; the proof passes its budget)
START=$SECONDS
apply_limit() {
  local l=330
  [ -n "${DEADLINE:-}" ] && l=$(( DEADLINE - (SECONDS - START) - 20 ))
  echo $(( l < 30 ? 30 : l ))
}
mkdir -p "$OUT" "$WORK"
KS="python3 -m kernelsmith"
quiet() { grep -v -i "USDT\|warn\|forward_call" | grep -v "^\[ *[0-9]*/"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  echo "batch $BATCH, ITERS=$ITERS REPS=$REPS MIN=$MIN MODES='$MODES', tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"; } \
  | tee -a "$OUT/machine.log"

# 1. The step's regions as tasks at its shapes, and seeds of our own for the norms, SiLU-mul and rotary.
timeout 120 $KS capture "$ENTRY" --out "$WORK/capture" --device cuda 2>&1 | quiet > "$OUT/capture_b$BATCH.log"
tail -3 "$OUT/capture_b$BATCH.log"
python3 examples/llama_decode/seeds.py "$WORK/capture" --out "$WORK/seeds" 2>&1 | quiet >> "$OUT/capture_b$BATCH.log"

# 2. Tune each seed's launches (no LLM), each within its own deadline.
runs=()
for seed in "$WORK"/seeds/*.py; do
  name=$(basename "$seed" .py)
  timeout "$TUNE_LIMIT" $KS evolve "$WORK/capture/$name.py" --seed "$seed" --mutator tune --iterations "$ITERS" \
    --device cuda --run-dir "$WORK/runs/$name" --quiet 2>&1 | quiet | tail -2 >> "$OUT/tune_b$BATCH.log"
  runs+=("$WORK/runs/$name")
done
cat "$OUT/tune_b$BATCH.log"

# 3. The patch checked in each mode beside the same mode without it (exit 1: the check failed; its
#    reason is apply's last line).
mode_flags=()
for m in $MODES; do mode_flags+=(--mode "$m"); done
timeout "$(apply_limit)" $KS apply "${runs[@]}" --capture "$WORK/capture" --out "$WORK/patch" --device cuda \
  --min-speedup "$MIN" --reps "$REPS" "${mode_flags[@]}" 2>&1 | quiet > "$OUT/apply_b$BATCH.log"
echo "apply exit ${PIPESTATUS[0]}" | tee -a "$OUT/apply_b$BATCH.log"
tail -40 "$OUT/apply_b$BATCH.log"
cp "$WORK/patch/apply.json" "$OUT/apply_b$BATCH.json" 2>/dev/null

# 4. One line per mode and measure: before -> after (median, min-max), the speedup, and the prediction
#    from the kernels' verdicts where capture measured the same time (the eager check's device time).
python3 benchmarks/device/apply_summary.py "$OUT/apply_b$BATCH.json" "batch $BATCH" 2>&1 | tee "$OUT/summary_b$BATCH.log"
