#!/usr/bin/env bash
# One device-tool call for the tuner (issue 19): (1) the launch without tunable literals
# (examples/softmax: `BLOCK_SIZE=triton.next_power_of_2(n_cols)`, no num_warps / num_stages) tuned
# for KS_SOFTMAX_ITERS iterations (0 skips it); (2) `evolve-suite` with the tuner on the named
# bundled tasks (copied to a sub-suite with their seeds), ITERATIONS each, then the suite benchmark
# of their best programs. Resumable while the machine stays warm (runs/ is kept). A dry run on the
# CPU: KS_DEVICE=cpu KS_SUITE_FLAGS=--small KS_SOFTMAX_ITERS=2 bash benchmarks/device/tuner.sh 2 softmax
# Other tasks and seeds: KS_TASKS_DIR, KS_SEEDS_DIR (TASK is a path under both, without .py, e.g.
# level1/19_ReLU), KS_RUNS (the runs folder). KernelBench from its seeds (issue 32): carry
# .kernelbench and runs/seed/candidates (candidates.tgz of benchmarks/device/seed.sh, unpacked), then
# KS_SOFTMAX_ITERS=0 KS_TASKS_DIR=.kernelbench/KernelBench KS_SEEDS_DIR=runs/seed/candidates
# KS_RUNS=runs/kb-tune bash benchmarks/device/tuner.sh 20 level1/19_ReLU level2/...
# Usage (device machine, repo root): bash benchmarks/device/tuner.sh ITERATIONS TASK...
set -u
if [ "${KS_DEVICE:-cuda}" = cuda ]; then  # the device image lacks some dependencies: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ITER=${1:-40}; shift
TASKS_DIR=${KS_TASKS_DIR:-examples/suite} SEEDS_DIR=${KS_SEEDS_DIR:-examples/suite_seeds} RUNS=${KS_RUNS:-runs/suite-tune40}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee -a "$OUT/machine.log"
if [ "${KS_SOFTMAX_ITERS:-12}" -gt 0 ]; then
  python3 -m kernelsmith.cli evolve examples/softmax/task.py --seed examples/softmax/triton_softmax.py --mutator tune \
    --iterations "${KS_SOFTMAX_ITERS:-12}" --device "${KS_DEVICE:-cuda}" --run-dir runs/softmax-nextpow2 --json 2>&1 | grep -v USDT | tail -1 > "$OUT/softmax_nextpow2_summary.json"
  python3 -m kernelsmith.cli export runs/softmax-nextpow2 --format jsonl 2>/dev/null | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    keys = ('iteration', 'operator', 'status', 'speedup', 'speedup_vs_compile', 'candidate_ms', 'error', 'config')
    print(json.dumps({k: r[k] for k in keys}))
" > "$OUT/softmax_nextpow2_programs.jsonl"
fi
# Across sessions: the runs of an earlier call come back as $OUT/suite_runs.tgz; put that file at
# runs/suite_runs.tgz here and name runs/suite_runs.tgz in the device tool's carry to resume them.
if [ -f runs/suite_runs.tgz ] && [ ! -d "$RUNS" ]; then tar xzf runs/suite_runs.tgz -C "$(dirname "$RUNS")"; fi
rm -rf runs/subsuite && mkdir -p runs/subsuite/tasks runs/subsuite/seeds
for t in "$@"; do
  mkdir -p "runs/subsuite/tasks/$(dirname "$t")" "runs/subsuite/seeds/$(dirname "$t")"
  cp "$TASKS_DIR/$t.py" "runs/subsuite/tasks/$t.py"; cp "$SEEDS_DIR/$t.py" "runs/subsuite/seeds/$t.py"
done
if [ $# -gt 0 ]; then
  # a time limit of its own (KS_SUITE_LIMIT s), so that what ran is still exported below
  timeout "${KS_SUITE_LIMIT:-100000}" python3 -m kernelsmith.cli evolve-suite runs/subsuite/tasks --seeds runs/subsuite/seeds --mutator tune \
    --iterations "$ITER" --device "${KS_DEVICE:-cuda}" ${KS_SUITE_FLAGS:-} --runs-dir "$RUNS" 2>&1 | grep -v USDT | tee "$OUT/suite_tune.log" | tail -30
  cp "$RUNS/suite_report.json" "$OUT/" 2>/dev/null
  for t in "$@"; do
    # the run's best as summary.json names it (the store's success rule), with its config and the seed's
    python3 -m kernelsmith.cli export "$RUNS/$t" --format jsonl 2>/dev/null | python3 -c "
import json, sys
rows = {r['id']: r for r in map(json.loads, sys.stdin)}
s = json.load(open('$RUNS/$t/summary.json'))
best, seed = s['best'] or {}, s['start'] or {}
print(json.dumps({'task': '$t', 'programs': s['programs'], 'status_counts': s['status_counts'],
  'seed_config': rows.get(seed.get('program_id'), {}).get('config'), 'best_iteration': best.get('iteration'),
  'best_speedup': best.get('speedup'), 'best_vs_compile': best.get('speedup_vs_compile'),
  'best_config': rows.get(best.get('program_id'), {}).get('config')}))
" >> "$OUT/suite_best_configs.jsonl"
    python3 -c "import json; print(json.dumps(json.load(open('$RUNS/$t/summary.json'))))" >> "$OUT/summaries.jsonl" 2>/dev/null
  done
fi
[ -d "$RUNS" ] && tar czf "$OUT/suite_runs.tgz" -C "$(dirname "$RUNS")" --exclude='*.html' "$(basename "$RUNS")"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | tee -a "$OUT/machine.log"
