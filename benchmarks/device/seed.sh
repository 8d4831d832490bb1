#!/usr/bin/env bash
# Issue 32 on the GPU, one device-tool call: benchmarks/seed_kernelbench.py (`kernelsmith seed` on
# KernelBench level 1 and level 2, every KS_STEP-th problem by number, default 2; each seed judged by
# the evaluator as any candidate; Inductor's output kept as records; a per-task table), in chunks that
# stop before KS_DEADLINE seconds (default 480; killed at KS_HARD_LIMIT, 560) so that the call returns
# its files (rewritten after every chunk).
# KernelBench's problems: KS_KERNELBENCH=DIR with level1/ and level2/ in it, carried in (the device
# machine reaches no network): `bash benchmarks/kernelbench/fetch_problems.sh` puts them in the
# ignored .kernelbench/ (carry it with .whl). Rows of earlier calls: KS_DONE=FILE (their seeds.jsonl,
# concatenated, e.g. benchmarks/results/seed_kernelbench_rows.jsonl) are skipped.
# Output under $OUT (7 files): machine.log, seed.log, seeds.jsonl (this call's rows), seed_table.md and
# summary.json (all rows), records.tgz, candidates.tgz.
# Usage (device machine, repo root): bash benchmarks/device/seed.sh
# A dry run on the CPU (every task: "seed needs a CUDA GPU"): KS_DEVICE=cpu bash benchmarks/device/seed.sh
set -u
if [ "${KS_DEVICE:-cuda}" = cuda ]; then  # the device image lacks some dependencies: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
KB=${KS_KERNELBENCH:-.kernelbench/KernelBench}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "KernelBench: $KB, every ${KS_STEP:-2}th problem; $(nproc) CPUs"; } | tee -a "$OUT/machine.log"
# Output to a file, not a pipe: a sandbox left behind by the hard limit must not hold the call open.
timeout -k 5 "${KS_HARD_LIMIT:-560}" python3 benchmarks/seed_kernelbench.py --kernelbench "$KB" --out "$OUT" \
  --step "${KS_STEP:-2}" --deadline "${KS_DEADLINE:-480}" --device "${KS_DEVICE:-cuda}" \
  ${KS_JOBS:+--jobs "$KS_JOBS"} ${KS_DONE:+--done "$KS_DONE"} > /tmp/seed_kernelbench.txt 2>&1
echo "exit $?"
grep -v -E "USDT|UserWarning|_warn_once" /tmp/seed_kernelbench.txt | tail -40
