#!/usr/bin/env bash
# KernelBench's level-1 and level-2 problems (MIT, see LICENSE here) into the ignored .kernelbench/
# at the commit the vendored files come from (SOURCE.md), for benchmarks that run them all
# (benchmarks/device/seed.sh) and must carry them to a machine without network.
# Usage (repo root): bash benchmarks/kernelbench/fetch_problems.sh [KERNELBENCH_GIT_DIR]  (a clone or a bare mirror)
# Without an argument it clones https://github.com/ScalingIntelligence/KernelBench (network).
set -euo pipefail
COMMIT=423217d9fda91e0c2d67e4a43bf62f96f6d104f1
SRC=${1:-}
if [ -z "$SRC" ]; then
  SRC=$(mktemp -d)/KernelBench
  git clone -q https://github.com/ScalingIntelligence/KernelBench "$SRC"
fi
rm -rf .kernelbench && mkdir -p .kernelbench
git -C "$SRC" archive "$COMMIT" KernelBench/level1 KernelBench/level2 LICENSE | tar -x -C .kernelbench
echo "$(ls .kernelbench/KernelBench/level1 | wc -l) level-1 and $(ls .kernelbench/KernelBench/level2 | wc -l) level-2 problems in .kernelbench/KernelBench (KernelBench $COMMIT)"
