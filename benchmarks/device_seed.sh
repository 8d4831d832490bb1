#!/usr/bin/env bash
# Issue 32 on the GPU, one device-tool call: `kernelsmith seed` on KernelBench level 1 and level 2
# (every KS_STEP-th problem by number, default 2: every second one), each seed judged by
# `kernelsmith eval --json` (the same rules as any candidate), Inductor's output of this torch kept
# as records (new fixtures for tests/cases/seed/: `kernelsmith seed --record`), and a per-task table.
# KernelBench's problems: KS_KERNELBENCH=DIR with level1/ and level2/ in it (a KernelBench checkout's
# KernelBench/ folder, carried in: the device machine reaches no network); by default the few
# problems vendored in benchmarks/kernelbench/problems. Resumable: a task with a row is skipped.
# Output under $OUT (7 files): machine.log, seed.log, seeds.jsonl (one row per task), seed_table.md,
# records.tgz (Inductor records), candidates.tgz (the seeds), summary.json.
# Usage (device machine, repo root): bash benchmarks/device_seed.sh
# A dry run on the CPU (every task: "seed needs a CUDA GPU"): KS_DEVICE=cpu bash benchmarks/device_seed.sh
set -u
if [ "${KS_DEVICE:-cuda}" = cuda ]; then  # the device image lacks some dependencies: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
KB=${KS_KERNELBENCH:-benchmarks/kernelbench/problems}
STEP=${KS_STEP:-2}
RUN=runs/seed
mkdir -p "$OUT" "$RUN/records" "$RUN/candidates" "$RUN/evals"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "KernelBench: $KB, every ${STEP}th problem"; } | tee -a "$OUT/machine.log"
touch "$RUN/seeds.jsonl"
for level in level1 level2; do
  # problems sorted by their number (1_Conv2D..., 2_..., 10_...), every STEP-th from the first
  ls "$KB/$level"/*.py 2>/dev/null | awk -F/ '{n=$NF; sub(/_.*/, "", n); print n "\t" $0}' | sort -n | cut -f2 \
    | awk -v s="$STEP" 'NR % s == 1 || s == 1' > "$RUN/$level.list"
  while read -r task; do
    name=$(basename "$task" .py)
    grep -q "\"task\": \"$level/$name\"" "$RUN/seeds.jsonl" && continue
    cand="$RUN/candidates/$level/$name.py"; rec="$RUN/records/$level/$name"; ev="$RUN/evals/$level-$name.json"
    mkdir -p "$RUN/candidates/$level" "$RUN/records/$level"
    start=$(date +%s)
    timeout "${KS_SEED_LIMIT:-900}" python3 -m kernelsmith.cli seed "$task" --out "$cand" --record "$rec" \
      > "$RUN/seed.out" 2> "$RUN/seed.err"; seed_rc=$?
    seed_s=$(( $(date +%s) - start ))
    rm -f "$ev"
    if [ "$seed_rc" = 0 ]; then
      timeout "${KS_EVAL_LIMIT:-900}" python3 -m kernelsmith.cli eval "$task" "$cand" --json --device "${KS_DEVICE:-cuda}" \
        2>> "$OUT/seed.log" | tail -1 > "$ev"
    fi
    # one row: the seed's outcome (or its one-line reason) and the verdict's headline fields
    python3 - "$level/$name" "$seed_rc" "$seed_s" "$RUN/seed.err" "$ev" "$RUN/seed.out" >> "$RUN/seeds.jsonl" <<'PY'
import json, os, sys
task, rc, secs, err, ev, out = sys.argv[1:]
row = {"task": task, "seed_rc": int(rc), "seed_s": int(secs)}
lines = [ln for ln in open(err).read().splitlines() if ln.strip() and "USDT" not in ln]
if int(rc) != 0:
    row["reason"] = (lines[-1] if lines else f"exit {rc}")[:300]
else:
    row["seed"] = open(out).read().strip()[-300:]
    try:
        v = json.loads(open(ev).read())
        for k in ("status", "success", "flags", "speedup", "speedup_vs_compile", "candidate_ms", "reference_ms", "compile_ms"):
            row[k] = v.get(k)
        row["error"] = (v.get("error") or "")[:300]
    except (OSError, ValueError):
        row["status"] = "no verdict"
print(json.dumps(row))
PY
    tail -1 "$RUN/seeds.jsonl" | tee -a "$OUT/seed.log"
  done < "$RUN/$level.list"
done
# the table and the issue's two numbers: share of tasks whose seed is a success, geomean vs torch.compile
python3 - "$RUN/seeds.jsonl" "$OUT/seed_table.md" "$OUT/summary.json" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = [r for r in rows if r.get("success")]
vs = [r["speedup_vs_compile"] for r in ok if r.get("speedup_vs_compile")]
summary = {"tasks": len(rows), "success": len(ok), "success_share": len(ok) / len(rows) if rows else None,
           "geomean_vs_compile": math.exp(sum(map(math.log, vs)) / len(vs)) if vs else None,
           "without_seed": {r["task"]: r.get("reason") or r.get("status") for r in rows if not r.get("success")}}
json.dump(summary, open(sys.argv[3], "w"), indent=1)
with open(sys.argv[2], "w") as f:
    f.write("| task | seed | status | speedup vs eager | vs torch.compile | reason / error |\n|---|---|---|---|---|---|\n")
    for r in rows:
        fmt = lambda x: f"{x:.3g}" if isinstance(x, (int, float)) else "-"
        f.write(f"| {r['task']} | {'yes' if r['seed_rc'] == 0 else 'no'} | {r.get('status', '-')} | {fmt(r.get('speedup'))} "
                f"| {fmt(r.get('speedup_vs_compile'))} | {(r.get('reason') or r.get('error') or '').replace('|', '/')[:160]} |\n")
print(json.dumps({k: v for k, v in summary.items() if k != "without_seed"}))
PY
tar czf "$OUT/records.tgz" -C "$RUN" records
tar czf "$OUT/candidates.tgz" -C "$RUN" candidates
