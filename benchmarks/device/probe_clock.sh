#!/usr/bin/env bash
# One device call: benchmarks/probes/graph_clock.py on the 2-us and 60-us softmax, and three verdicts of
# the honest 2-us softmax through `kernelsmith eval --json` (their judge_timing), under $OUT (issue 54).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
for spec in "examples/softmax/task.py --calls 4096" "tests/redteam/tasks/softmax_large_task.py --calls 220"; do
  set -- $spec
  timeout 150 python3 benchmarks/probes/graph_clock.py $1 examples/softmax/triton_softmax.py $2 $3 --repeats 8 | tee -a $OUT/graph_clock.jsonl
done
for i in 1 2 3; do
  timeout 120 python3 -m kernelsmith.cli eval examples/softmax/task.py examples/softmax/triton_softmax.py --json 2>>$OUT/eval.err | tail -1 >> $OUT/eval.jsonl
done
python3 -c "
import json
for l in open('$OUT/eval.jsonl'):
    try: r = json.loads(l)
    except Exception: print('not json:', l[:200]); continue
    print(r.get('status'), r.get('flags'), r.get('candidate_ms'), r.get('judge_timing'))
"
# the honest 2-us kernels the H100 flagged on 2026-12-07, and the cheats at 2 us
timeout 300 python3 -m pytest -q -m cuda -p no:cacheprovider tests/redteam/test_redteam_cuda.py \
  -k "last_bits or persisting or control or faked_time" 2>&1 | tail -30 | tee $OUT/redteam.log
