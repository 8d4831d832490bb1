"""Issue 32's measurement: `kernelsmith seed` on KernelBench level 1 and level 2 (every --step-th
problem by number), each seed judged by the evaluator as any candidate is (the same verdict and
success rule as `kernelsmith eval`, torch.compile's time beside it), and a per-task table.

It works in chunks so that a device call of 10 minutes does useful work and a later call (or
session) goes on where it stopped: the seeds of a chunk are derived in parallel (`kernelsmith
seed` processes, four per GPU: Inductor's compile is CPU work), then the chunk's seeds are judged
by one warm EvalPool, one verdict at a time on each visible GPU, with nothing else on the GPUs. No
chunk starts when the last one's duration would carry it past --deadline. Rows already measured
(--done, e.g. a committed results file) are skipped and counted in the summary.

Output under --out (7 files): seed.log, seeds.jsonl (this call's rows), seed_table.md and
summary.json (over --done and this call's rows), records.tgz (Inductor's output code and launch
configs: fixtures for tests/cases/seed/), candidates.tgz (the seeds); machine.log is the caller's.

Usage: python benchmarks/seed_kernelbench.py --kernelbench DIR --out OUT [--done ROWS.jsonl]
(benchmarks/device/seed.sh runs it on the device machine).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelsmith.seed.start import SEED_COMMAND

VERDICT_FIELDS = (
    "status",
    "success",
    "speedup",
    "speedup_vs_compile",
    "candidate_ms",
    "reference_ms",
    "compile_ms",
)


def task_list(kernelbench: Path, levels: list[str], step: int) -> list[tuple[str, Path]]:
    """(level/name, path) of every step-th problem of each level, by problem number (1, 2, ... 10)."""
    out = []
    for level in levels:
        files = sorted((kernelbench / level).glob("*.py"), key=lambda p: (int(p.name.split("_")[0]), p.name))
        out += [(f"{level}/{p.stem}", p) for p in files[::step]]
    return out


def seed_one(key: str, task: Path, run: Path, limit: float, threads: int, command: list[str], gpu: str | None) -> dict:
    """`kernelsmith seed` as a user runs it, on one GPU, in its own process group (killed whole at
    the limit)."""
    cand, rec = run / "candidates" / f"{key}.py", run / "records" / key
    cand.parent.mkdir(parents=True, exist_ok=True)
    rec.mkdir(parents=True, exist_ok=True)
    cmd = [*command, str(task), "--out", str(cand), "--record", str(rec)]
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=str(threads))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # Inductor's compile workers with it
        proc.communicate()
        return {
            "task": key,
            "seed_rc": None,
            "seed_s": round(time.monotonic() - t0),
            "reason": f"seed took over {limit:.0f} s",
        }
    row: dict = {"task": key, "seed_rc": proc.returncode, "seed_s": round(time.monotonic() - t0)}
    lines = [ln for ln in err.splitlines() if ln.strip() and "USDT" not in ln]
    if proc.returncode != 0:
        row["reason"] = (lines[-1] if lines else f"exit {proc.returncode}")[:300]
    else:
        row["seed"] = out.strip()[-300:]
    return row


def submit(pool, opts, row: dict, task: Path, cand: Path):
    """The seed's evaluation, by the rules of any candidate: a Future, or None where the file is
    not a task (a seed was written for it all the same) and the row says so."""
    from kernelsmith.errors import UserError
    from kernelsmith.task import Task

    try:
        return pool.submit(Task.from_file(task), cand.read_text(), opts)
    except UserError as exc:
        row.update(status="task_error", success=False, error=str(exc)[:300])
        return None


def record_verdict(row: dict, r) -> None:
    row.update({k: getattr(r, k) for k in VERDICT_FIELDS})
    row["status"] = r.status.value
    row["flags"] = [f.value for f in r.flags]
    row["triton_kernels"] = len(r.triton_kernels)
    row["error"] = (r.error or "")[-300:]
    row["eval_s"] = round(r.stages.total, 1)


def summarize(rows: list[dict]) -> dict:
    from kernelsmith.suite.metrics import geomean_speedup

    ok = [r for r in rows if r.get("success")]
    return {
        "tasks": len(rows),
        "success": len(ok),
        "success_share": len(ok) / len(rows) if rows else None,
        "geomean_vs_compile": geomean_speedup([(True, r.get("speedup_vs_compile")) for r in ok]),
        "without_seed": {
            r["task"]: r.get("reason") or r.get("error") or r.get("status") for r in rows if not r.get("success")
        },
    }


def table(rows: list[dict]) -> str:
    fmt = lambda x: f"{x:.3g}" if isinstance(x, (int, float)) else "-"  # noqa: E731
    lines = [
        "| task | seed s | status | speedup vs eager | vs torch.compile | Triton kernels | reason / error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:  # in task order (level, then problem number)
        why = (r.get("reason") or r.get("error") or "").replace("|", "/").replace("\n", " ")[:160]
        seeded = f"{r['seed_s']}" if r.get("seed_rc") == 0 else f"no ({r['seed_s']})"
        lines.append(
            f"| {r['task']} | {seeded} | {r.get('status', '-')} | {fmt(r.get('speedup'))} "
            f"| {fmt(r.get('speedup_vs_compile'))} | {r.get('triton_kernels', '-')} | {why} |"
        )
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, run: Path, done: list[dict], rows: list[dict]) -> None:
    (out / "seeds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    every = done + rows
    (out / "seed_table.md").write_text(table(every))
    (out / "summary.json").write_text(json.dumps(summarize(every), indent=1))
    for name in ("records", "candidates"):
        with tarfile.open(out / f"{name}.tgz", "w:gz") as tar:
            if (run / name).is_dir():
                tar.add(run / name, arcname=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True, help="a folder with level1/ and level2/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--run", type=Path, default=Path("runs/seed"), help="work folder (candidates, records)")
    ap.add_argument("--levels", nargs="+", default=["level1", "level2"])
    ap.add_argument("--step", type=int, default=2, help="every step-th problem by number")
    ap.add_argument("--done", type=Path, help="rows measured before (seeds.jsonl of earlier calls): skipped")
    ap.add_argument("--jobs", type=int, help="seeds derived at once [default: 4 per GPU]")
    ap.add_argument("--chunk", type=int, help="tasks per chunk, seeded together, then judged [default: --jobs]")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds after which no chunk starts")
    ap.add_argument("--seed-limit", type=float, default=240.0, help="seconds one seed may take")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--seed-command",
        nargs="+",
        default=list(SEED_COMMAND),
        help="what derives a seed, given TASK --out FILE --record DIR (a stand-in for a dry run of the judging)",
    )
    args = ap.parse_args()
    t_start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    done = [json.loads(ln) for ln in args.done.read_text().splitlines() if ln.strip()] if args.done else []
    measured = {r["task"] for r in done}
    todo = [(k, p) for k, p in task_list(args.kernelbench, args.levels, args.step) if k not in measured]
    log = (args.out / "seed.log").open("a")

    def say(text: str) -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.evaluate.pool import visible_gpus

    # Every visible GPU: seeds spread over them, and one verdict at a time on each (a pool worker per GPU).
    gpus: list[str | None] = list(visible_gpus()) if args.device == "cuda" else [None]
    jobs = args.jobs or 4 * len(gpus)
    chunk_size = args.chunk or jobs
    say(
        f"{len(todo)} tasks to seed ({len(measured)} measured before), {jobs} at once on {len(gpus)} "
        f"{'GPU(s)' if args.device == 'cuda' else 'worker(s)'}, chunks of {chunk_size}"
    )
    opts = EvalOptions(device=args.device, compile_baseline=True)
    threads = max(1, (os.cpu_count() or 2) // jobs)
    rows: list[dict] = []
    last_chunk = 0.0
    pool = EvalPool(device=args.device, workers=len(gpus), options=opts)
    with pool, ThreadPoolExecutor(jobs) as seeders:
        for at in range(0, len(todo), chunk_size):
            elapsed = time.monotonic() - t_start
            if elapsed + last_chunk > args.deadline:
                say(f"stopped at {elapsed:.0f} s (deadline {args.deadline:.0f} s): {len(todo) - at} tasks left")
                break
            t_chunk = time.monotonic()
            chunk = todo[at : at + chunk_size]
            seeded = [
                f.result()
                for f in [
                    seeders.submit(seed_one, key, path, args.run, args.seed_limit, threads, args.seed_command, gpu)
                    for (key, path), gpu in zip(chunk, itertools.cycle(gpus))
                ]
            ]
            futures = [
                submit(pool, opts, row, path, args.run / "candidates" / f"{key}.py") if row["seed_rc"] == 0 else None
                for (key, path), row in zip(chunk, seeded)
            ]
            for row, future in zip(seeded, futures):
                if future is not None:
                    try:
                        record_verdict(row, future.result())
                    except Exception as exc:  # the pool's own failure: this row says so, the run goes on
                        row.update(status="no verdict", success=False, error=f"{type(exc).__name__}: {exc}"[:300])
                rows.append(row)
                say(json.dumps(row))
            write_outputs(args.out, args.run, done, rows)
            last_chunk = time.monotonic() - t_chunk
    write_outputs(args.out, args.run, done, rows)
    summary = summarize(done + rows)
    say(json.dumps({k: v for k, v in summary.items() if k != "without_seed"}))


if __name__ == "__main__":
    main()
