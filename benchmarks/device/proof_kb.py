"""The proof's step 4 on KernelBench level 1 and level 2, resumable by row across device calls.

kb-seeds: `kernelsmith seed` on every second problem (100), by benchmarks/seed_kernelbench.py (seeds
derived in parallel on the host's CPUs, a chunk at a time, then judged with the GPU to themselves; no
chunk starts past its deadline). The rows of earlier calls (benchmarks/results/proof/kb-seeds/
rows.jsonl) are passed as --done and skipped; the seeds of earlier calls (candidates.tgz) are unpacked
first, so that the candidates.tgz returned holds every seed so far. Returned: rows.jsonl (every row),
candidates.tgz, callN.log, summary.md (the table and the issue's thresholds).

kb-tune: 20 tuner iterations (`kernelsmith evolve --mutator tune`) from the successful seed of every
tenth problem (20), one problem after another, none started that the call's time cannot hold (at the
longest time a problem took so far); torch.compile's time beside each. A problem cut by the call's
time runs again on the next call (twice at most). Returned: rows.jsonl, callN.log, summary.md.

A dry run (CPU) seeds the vendored problems (benchmarks/kernelbench/problems): every seed says it needs
a GPU, and the tuner then has no seed to start from.
"""

from __future__ import annotations

import json
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from proof_core import REPO, Ctx, Outcome, merge_rows, read_rows, rows_left, run_logged, write_rows

sys.path.insert(0, str(REPO / "benchmarks"))
import seed_kernelbench  # noqa: E402  (benchmarks/ is no package)

SEED_PY = "benchmarks/seed_kernelbench.py"  # run from the repo root

LEVELS = ["level1", "level2"]
TUNE_ITERATIONS = 20
TUNE_FIRST_ESTIMATE = 240.0  # seconds one problem's tuning is taken to need before one has run
ROW_MARGIN = 30.0  # seconds kept after a row


def problems(ctx: Ctx) -> Path:
    return REPO / "benchmarks" / "kernelbench" / "problems" if ctx.dry_run else ctx.kernelbench


def plan(ctx: Ctx, step: int) -> list[str]:
    return [key for key, _ in seed_kernelbench.task_list(problems(ctx), LEVELS, step)]


def in_order(rows: list[dict], keys: list[str]) -> list[dict]:
    at = {k: i for i, k in enumerate(keys)}
    return sorted((r for r in rows if r["task"] in at), key=lambda r: at[r["task"]])


def stamp(rows: list[dict], ctx: Ctx) -> list[dict]:
    return [{**r, "card": ctx.machine.get("card"), "call": ctx.call} for r in rows]


# ---- seeds ----------------------------------------------------------------------------------------


def seeds(ctx: Ctx) -> Outcome:
    work, out, before = ctx.step_work("kb-seeds"), ctx.step_out("kb-seeds"), ctx.step_results("kb-seeds")
    keys = plan(ctx, 2)
    old = read_rows(before / "rows.jsonl")
    run = work / "run"
    run.mkdir(parents=True, exist_ok=True)
    if (before / "candidates.tgz").is_file():
        with tarfile.open(before / "candidates.tgz") as tar:
            tar.extractall(run, filter="data")
    write_rows(work / "done.jsonl", old)
    limit = ctx.left() - 20
    cpus = ctx.machine.get("cpus") or 2
    cmd = [
        ctx.python,
        SEED_PY,
        "--kernelbench",
        str(problems(ctx)),
        "--out",
        str(work / "out"),
        "--run",
        str(run),
        "--step",
        "2",
        "--done",
        str(work / "done.jsonl"),
        "--deadline",
        str(int(limit - 60)),
        "--device",
        ctx.device,
        "--jobs",
        str(max(4, cpus // 2)),
    ]
    ran = run_logged(cmd, out / f"call{ctx.attempt}.log", limit, ctx.env())
    new = stamp(read_rows(work / "out" / "seeds.jsonl"), ctx)
    rows = in_order(merge_rows(old, new), keys)
    if new:
        write_rows(out / "rows.jsonl", rows)
        if (work / "out" / "candidates.tgz").is_file():
            (out / "candidates.tgz").write_bytes((work / "out" / "candidates.tgz").read_bytes())
    left = rows_left(keys, rows)
    status = "done" if not left else "partial" if new else ("timeout" if ran.rc is None else "error")
    note = f"{len(keys) - len(left)}/{len(keys)} problems seeded and judged (+{len(new)} this call)"
    return Outcome(status, note, seeds_summary(rows, len(keys)), len(keys) - len(left), len(keys), len(new))


def seeds_summary(rows: list[dict], total: int) -> str:
    s = seed_kernelbench.summarize(rows)
    share = f"{s['success_share']:.0%}" if s["success_share"] is not None else "-"
    geo = f"{s['geomean_vs_compile']:.3g}x" if s["geomean_vs_compile"] else "-"
    broken = [r["task"] for r in rows if "Traceback" in str(r.get("error", "")) or r.get("status") == "no verdict"]
    cards = sorted({str(r.get("card")) for r in rows})
    return (
        f"{len(rows)} of {total} problems so far (cards: {', '.join(cards) or '-'}): **{s['success']} seeds are a "
        f"success ({share}; the issue asks >= 90%)**, geomean over torch.compile of the successes **{geo}** "
        f"(asked: >= 0.98x); ended in a traceback or without a verdict: {', '.join(broken) or 'none'}.\n\n"
        + seed_kernelbench.table(rows)
    )


# ---- tuner ----------------------------------------------------------------------------------------


def run_rows(ctx: Ctx, keys: list[str], do_row: Callable[[str], dict], estimate: Callable[[], float]) -> list[dict]:
    """do_row(key) for each key in turn while the call's time holds one more (estimate() seconds and a
    margin): the rows made. Nothing is started that would be cut."""
    made = []
    for key in keys:
        if ctx.left() < estimate() + ROW_MARGIN:
            break
        made.append(do_row(key))
    return made


def longest(rows: list[dict], default: float) -> float:
    """The longest time a row took that ran to its end (the first estimate before any has)."""
    times = [r["seconds"] for r in rows if r.get("seconds") and r.get("final", True) and r.get("ran")]
    return max([default, *times]) if times else default


def tune_row(ctx: Ctx, key: str, seed: dict | None, cands: Path, runs: Path, log: Path, before: dict) -> dict:
    attempts = before.get("attempts", 0) + 1
    if not seed or not seed.get("success"):
        why = (seed or {}).get("reason") or (seed or {}).get("error") or (seed or {}).get("status") or "no seed row"
        return {"task": key, "status": "no successful seed", "reason": str(why)[:200], "final": True}
    cand = cands / "candidates" / f"{key}.py"
    if not cand.is_file():
        return {"task": key, "status": "seed file missing from candidates.tgz", "final": True}
    limit = max(60.0, min(480.0, ctx.left() - ROW_MARGIN - 60))
    cmd = [
        ctx.python,
        "-m",
        "kernelsmith",
        "evolve",
        str(problems(ctx) / f"{key}.py"),
        "--seed",
        str(cand),
        "--mutator",
        "tune",
        "--iterations",
        str(TUNE_ITERATIONS),
        "--device",
        ctx.device,
        "--run-dir",
        str(runs / key),
        "--quiet",
        "--json",
        "--time-limit",
        str(int(limit)),
    ]
    ran = run_logged(cmd, log, limit + 90, ctx.env())
    row = {
        "task": key,
        "seed_speedup": seed.get("speedup"),
        "seed_vs_compile": seed.get("speedup_vs_compile"),
        "attempts": attempts,
        "seconds": round(ran.seconds),
        "ran": True,
    }
    try:
        s = json.loads((runs / key / "summary.json").read_text())
    except (OSError, ValueError):
        return row | {
            "status": "killed at the time limit" if ran.rc is None else f"exit {ran.rc}, no summary",
            "final": attempts >= 2,
        }
    best = s.get("best") or {}
    ms, vs_c = best.get("candidate_ms"), best.get("speedup_vs_compile")
    done = s.get("iterations_done", 0)
    cut = str(s.get("stop_reason", "")).startswith("time limit") and done < TUNE_ITERATIONS
    return row | {
        "status": "tuned" if best.get("success") else f"no success ({best.get('status')})",
        "iterations_done": done,
        "stop_reason": s.get("stop_reason"),
        "programs": s.get("programs"),
        "best_speedup": best.get("speedup"),
        "best_vs_compile": vs_c,
        "best_ms": ms,
        "compile_ms": ms * vs_c if ms and vs_c else None,
        "best_iteration": best.get("iteration"),
        "final": not cut or attempts >= 2,
    }


def tune(ctx: Ctx) -> Outcome:
    work, out, before = ctx.step_work("kb-tune"), ctx.step_out("kb-tune"), ctx.step_results("kb-tune")
    keys = plan(ctx, 10)
    seed_rows = {r["task"]: r for r in read_rows(ctx.step_results("kb-seeds") / "rows.jsonl")}
    old = read_rows(before / "rows.jsonl")
    by_task = {r["task"]: r for r in old}
    cands = work / "candidates"
    if (ctx.step_results("kb-seeds") / "candidates.tgz").is_file():
        with tarfile.open(ctx.step_results("kb-seeds") / "candidates.tgz") as tar:
            tar.extractall(cands, filter="data")
    log = out / f"call{ctx.attempt}.log"
    made: list[dict] = []

    def do_row(key: str) -> dict:
        row = tune_row(ctx, key, seed_rows.get(key), cands, work / "runs", log, by_task.get(key, {}))
        made.append(row)
        return row

    free = [k for k in rows_left(keys, old) if not (seed_rows.get(k) or {}).get("success")]
    run_rows(ctx, free, do_row, lambda: 0.0)  # no GPU: rows that say why no tuning
    todo = [k for k in rows_left(keys, old) if k not in free]
    run_rows(ctx, todo, do_row, lambda: longest(old + made, TUNE_FIRST_ESTIMATE))
    new = stamp(made, ctx)
    rows = in_order(merge_rows(old, new), keys)
    if new:
        write_rows(out / "rows.jsonl", rows)
    left = rows_left(keys, rows)
    progressed = sum(1 for r in new if r.get("final", True))
    status = "done" if not left else "partial"
    note = f"{len(keys) - len(left)}/{len(keys)} problems tuned or passed over (+{progressed} this call)"
    return Outcome(status, note, tune_summary(rows, len(keys)), len(keys) - len(left), len(keys), progressed)


def tune_summary(rows: list[dict], total: int) -> str:
    from kernelsmith.suite.metrics import geomean_speedup

    fmt = lambda x: f"{x:.3g}" if isinstance(x, (int, float)) else "-"  # noqa: E731
    tuned = [r for r in rows if r.get("status") == "tuned"]
    geo = geomean_speedup([(True, r.get("best_vs_compile")) for r in tuned])
    seed_geo = geomean_speedup([(True, r.get("seed_vs_compile")) for r in tuned])
    head = ["task", "seed vs compile", "tuned vs eager", "tuned vs compile", "tuned ms", "torch.compile ms"]
    head += ["iterations", "stop", "card"]
    lines = [
        f"{len(rows)} of {total} problems so far; {len(tuned)} tuned: geomean over torch.compile **{fmt(geo)}x** after "
        f"tuning (the issue asks >= 1.05x), {fmt(seed_geo)}x for their seeds.\n",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        if r.get("status") == "tuned":
            cells = [fmt(r.get(k)) for k in ("best_speedup", "best_vs_compile", "best_ms", "compile_ms")]
        else:
            cells = [f"{r.get('status')}: {r.get('reason', '')}"[:100].replace("|", "/"), "-", "-", "-"]
        cells = [r["task"], fmt(r.get("seed_vs_compile")), *cells]
        cells += [str(r.get("iterations_done", "-")), str(r.get("stop_reason") or "-"), str(r.get("card"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
