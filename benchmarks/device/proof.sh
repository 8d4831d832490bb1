#!/usr/bin/env bash
# Issue 47's GPU proof, one device call (at most ~9.5 min): the first steps not done, in priority order
# (gate, Llama decode, models no one here wrote, KernelBench seeds and tuner, the microsecond table),
# each step's results and the updated state under $OUT/proof/. The lead copies them into the repo
# (python benchmarks/device/proof.py --take FILES_AT) and commits; the next call goes on from there.
# benchmarks/device/proof.py says how; docs/benchmarks.md ("Running the device scripts") has the command
# and the carry list (.whl, .kernelbench).
# Usage (device machine, repo root): bash benchmarks/device/proof.sh [proof.py flags, e.g. --step timing]
# A dry run on the CPU (no wheels installed; each step's plumbing at tiny sizes, or its skip):
#   PYTHON=.venv/bin/python bash benchmarks/device/proof.sh --dry-run --out /tmp/proof-dry
set -u
START=$SECONDS
LIMIT=${KS_PROOF_SECONDS:-575}  # the device tool stops a command at 600 s
PYTHON=${PYTHON:-python3}
case " $* " in
  *" --dry-run "*) ;;
  *) python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
     export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} ;;
esac
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LEFT=$(( LIMIT - (SECONDS - START) ))
# the driver keeps its budget; the hard limit only catches a driver that hangs
timeout -k 10 "$LEFT" "$PYTHON" benchmarks/device/proof.py --budget "$(( LEFT - 20 ))" "$@" 2>&1 | grep --line-buffered -v USDT
exit "${PIPESTATUS[0]}"
