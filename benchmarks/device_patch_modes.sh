#!/usr/bin/env bash
# Issue 42 on a GPU, one device-tool call per batch (~8 min each): the Llama decode step (Llama-3-8B
# widths, 2 layers, bf16; transformers from the image) at batch B is captured, our own seeds
# (examples/llama_decode/seeds.py) are tuned ITERS iterations each, and `kernelsmith apply` checks the
# patch eager, compiled (torch.compile) and compiled with CUDA graphs (mode="reduce-overhead"), each mode
# against the same mode without the patch: outputs, graph breaks, the regions each kernel took, and the
# step's device time and wall time before -> after with their min-max spreads (REPS forwards each).
# Under $OUT: machine.log, capture_bB.log, tune_bB.log, apply_bB.log (apply's own lines), apply_bB.json,
# summary_bB.log (one line per mode and measure).
# Usage (on the device machine, from the repo root; carry .whl, as benchmarks/device_llama.sh does):
#   bash benchmarks/device_patch_modes.sh 1      # batch 1 (decode_step)
#   bash benchmarks/device_patch_modes.sh 32     # batch 32 (decode_step_b32), a second call
# ITERS (tuner iterations per kernel, 6), REPS (forwards per measure, 20), MIN (--min-speedup: the kernels
# whose verdict beats eager, 1), MODES ("eager compile graphs") override.
set -u
BATCH=${1:-1}
case "$BATCH" in
  1) ENTRY=examples/llama_decode/model.py:decode_step ;;
  32) ENTRY=examples/llama_decode/model.py:decode_step_b32 ;;
  *) echo "device_patch_modes.sh: batch 1 or 32, not '$BATCH'" >&2; exit 2 ;;
esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
WORK=/tmp/patch_modes/b$BATCH
ITERS=${ITERS:-6}
REPS=${REPS:-20}
MIN=${MIN:-1}
MODES=${MODES:-"eager compile graphs"}
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
  timeout 90 $KS evolve "$WORK/capture/$name.py" --seed "$seed" --mutator tune --iterations "$ITERS" \
    --device cuda --run-dir "$WORK/runs/$name" --quiet 2>&1 | quiet | tail -2 >> "$OUT/tune_b$BATCH.log"
  runs+=("$WORK/runs/$name")
done
cat "$OUT/tune_b$BATCH.log"

# 3. The patch checked in each mode beside the same mode without it (exit 1: the check failed; its
#    reason is apply's last line).
mode_flags=()
for m in $MODES; do mode_flags+=(--mode "$m"); done
timeout 330 $KS apply "${runs[@]}" --capture "$WORK/capture" --out "$WORK/patch" --device cuda \
  --min-speedup "$MIN" --reps "$REPS" "${mode_flags[@]}" 2>&1 | quiet > "$OUT/apply_b$BATCH.log"
echo "apply exit ${PIPESTATUS[0]}" | tee -a "$OUT/apply_b$BATCH.log"
tail -40 "$OUT/apply_b$BATCH.log"
cp "$WORK/patch/apply.json" "$OUT/apply_b$BATCH.json" 2>/dev/null

# 4. One line per mode and measure: before -> after (median, min-max), the speedup, and the prediction
#    from the kernels' verdicts where capture measured the same time (the eager check's device time).
python3 - "$OUT/apply_b$BATCH.json" "$BATCH" <<'PY' 2>&1 | tee "$OUT/summary_b$BATCH.log"
import json, sys
try:
    applied = json.load(open(sys.argv[1]))
except OSError:
    sys.exit(f"batch {sys.argv[2]}: no apply.json (apply did not finish)")
kernels = [f"{k['name']} {k['speedup'] or 0:.3g}x" for k in applied["kernels"] if k["why"] is None]
print(f"batch {sys.argv[2]}: kernels applied: {', '.join(kernels) or 'none'}")
p = applied.get("prediction")
for e in applied.get("checks") or []:
    said = "outputs match" if e["outputs_match"] else f"outputs differ: {e['mismatch']}"
    breaks = f", graph breaks {e['graph_breaks'][1]} (unpatched {e['graph_breaks'][0]})" if e["graph_breaks"] else ""
    print(f"batch {sys.argv[2]} {e['mode']}: {said}{breaks}; regions taken per forward {e['fired']}")
    for t in e["timings"]:
        b, a = t["before_ms"], t["after_ms"]
        line = (f"batch {sys.argv[2]} {e['mode']} {t['measure']}: {b['median']:.4g} ms ({b['low']:.4g}-{b['high']:.4g})"
                f" -> {a['median']:.4g} ms ({a['low']:.4g}-{a['high']:.4g}): {b['median'] / a['median']:.3g}x")
        if p and e["mode"] == "eager" and p["measure"] == t["measure"]:
            line += f"; predicted {p['speedup']:.3g}x ({p['low']:.3g}-{p['high']:.3g}) over {p['covered']:.1%}"
        print(line)
PY
