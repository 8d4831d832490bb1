"""Issue 47's GPU proof, one device call at a time: runs the first steps not done (STEPS, in priority
order), each within the call's time, and writes each step's results and the updated state under
--out/proof/, which the lead copies over benchmarks/results/proof/ (--take) and commits; the next
call goes on from there. State and rows: benchmarks/device/proof_core.py. The steps:
benchmarks/device/proof_steps.py, proof_models.py, proof_kb.py. docs/benchmarks.md, "Running the
device scripts", has the command.

    bash benchmarks/device/proof.sh                                   # on the device machine: one call
    python benchmarks/device/proof.py --dry-run --out /tmp/proof-dry  # this CPU machine: plumbing, tiny sizes
    python benchmarks/device/proof.py --plan                          # the steps and where the proof stands
    python benchmarks/device/proof.py --take FILES_AT                 # here: a call's results into the repo
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proof_core import MAX_FILES, REPO, RESULTS, Ctx, Outcome, State, pending, record, redo  # noqa: E402
from proof_steps import STEPS, Step  # noqa: E402

WRITE_MARGIN = 15.0  # seconds kept after a step for writing its results


def say(text: str) -> None:
    print(f"[proof] {text}", flush=True)


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(device: str) -> dict:
    """The card and software every figure of this call is named with."""
    gpus = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).splitlines()
    name, _, driver = (gpus[0] if gpus else "").partition(", ")
    card = (f"{len(gpus)} x " if len(gpus) > 1 else "") + name if name else f"no GPU ({device})"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "card": card,
        "driver": driver or "-",
        "torch": _version("torch"),
        "triton": _version("triton"),
        "transformers": _version("transformers"),
        "torchvision": _version("torchvision"),
        "cpus": os.cpu_count(),
        "commit": _tree_commit(),
    }


def _tree_commit() -> str:
    """The commit this tree is, or "?" (filled in by --take): the device's copy may have no .git, or one
    left from an earlier copy whose HEAD is not this tree (seen on 2026-12-06: it named a commit 4 back)."""
    head = _run(["git", "rev-parse", "--short", "HEAD"])
    try:
        same = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=REPO, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        same = False
    return head if head and same else "?"


def header(step: Step, ctx: Ctx, seconds: float) -> str:
    m = {k: "-" for k in ("date", "card", "driver", "torch", "triton", "commit")} | ctx.machine
    return (
        f"### {step.title}\n\n{m['date']}, **{m['card']}** (driver {m['driver']}), torch {m['torch']}, "
        f"triton {m['triton']}, tree {m['commit']}; proof call {ctx.call}, {seconds:.0f} s. Command: "
        f"`bash benchmarks/device/proof.sh` (step `{step.name}`; results in benchmarks/results/proof/{step.name}/).\n\n"
    )


def guarded(step: Step, ctx: Ctx) -> Outcome:
    """The step's outcome; an exception of the driver's own is an `error` outcome with its traceback kept."""
    try:
        return step.run(ctx)
    except Exception as exc:
        (ctx.step_out(step.name) / "error.log").write_text(traceback.format_exc())
        return Outcome("error", f"the driver broke: {type(exc).__name__}: {exc}"[:300])


def run_call(ctx: Ctx, state: State, steps: list[Step], only: list[str] | None = None) -> list[str]:
    """Run the first steps not finished (or `only`) while the time and the files returned allow; the
    state and each step's summary.md are written after every step."""
    by_name = {s.name: s for s in steps}
    ran: list[str] = []
    names = only or pending([s.name for s in steps], state)
    for name in names:
        step = by_name[name]
        waits = step.waits(ctx) if step.waits else None
        if waits:
            say(f"{name}: not this call: {waits}")
            continue
        if ctx.left() < step.need_s:
            say(f"{name}: {ctx.left():.0f} s left, it needs {step.need_s:.0f} s: the next call runs it")
            break
        if ctx.files_written() + (not ran) + step.max_files > MAX_FILES:  # + state.json
            say(f"{name}: its files would pass the {MAX_FILES} a call returns: the next call runs it")
            break
        say(f"{name}: {step.title} ({ctx.left():.0f} s left)")
        t0 = ctx.clock()
        ctx.attempt = state.step(name).attempts + 1
        outcome = guarded(step, ctx)
        seconds = ctx.clock() - t0
        s = record(state, name, outcome, {"n": ctx.call, **ctx.machine})
        s.history[-1]["seconds"] = round(seconds)
        (ctx.step_out(name) / "summary.md").write_text(header(step, ctx, seconds) + outcome.summary.strip() + "\n")
        (ctx.out / "state.json").write_text(state.to_json())
        say(f"{name}: {outcome.status} -> {s.status}: {outcome.note} ({seconds:.0f} s)")
        ran.append(name)
        if outcome.status in ("partial", "timeout"):
            break  # it used the call's time: what follows waits for the next call
    return ran


def plan(state: State, steps: list[Step]) -> str:
    lines = [f"{'step':<20} {'status':<8} {'calls':>5} {'rows':>9}  est. min  note"]
    for s in steps:
        st = state.step(s.name)
        rows = f"{st.rows_done}/{st.rows_total}" if st.rows_total is not None else "-"
        lines.append(f"{s.name:<20} {st.status:<8} {st.attempts:>5} {rows:>9}  {s.minutes:>8}  {st.note[:70]}")
    left = pending([s.name for s in steps], state)
    lines.append(f"next: {left[0] if left else 'nothing: the proof is done'}")
    return "\n".join(lines)


def _shown(path: Path) -> Path:
    return path.relative_to(REPO) if path.resolve().is_relative_to(REPO) else path


def take(src: Path, dst: Path = RESULTS) -> int:
    """A device call's results (the folder the device tool returned, holding proof/) into the repo: each
    file replaces the one of the same name; a tree the device could not name becomes HEAD here."""
    src = src / "proof" if (src / "proof").is_dir() else src
    if not (src / "state.json").is_file():
        print(f"take: no state.json in {src}", file=sys.stderr)
        return 2
    new, old = State.load(src / "state.json"), State.load(dst / "state.json")
    if len(new.calls) != len(old.calls) + 1:
        print(f"take: warning: these results are call {len(new.calls)}, the repo's state has {len(old.calls)} calls")
    head = _run(["git", "rev-parse", "--short", "HEAD"]) or "?"
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".json", ".md") and path.stat().st_size < 4_000_000:
            text = (
                path.read_text()
                .replace("tree ?;", f"tree {head} (taken);")
                .replace('"commit": "?"', f'"commit": "{head}"')
            )
            target.write_text(text)
        else:
            shutil.copyfile(path, target)
        print(_shown(target))
    steps = ", ".join(new.calls[-1].get("steps", [])) if new.calls else ""
    card = new.calls[-1].get("card", "") if new.calls else ""
    print(f"\ngit add {_shown(dst)} && git commit -m 'proof call {len(new.calls)}: {steps} ({card})'")
    return 0


def missing_dependencies() -> list[str]:
    """pyproject's dependencies that this Python cannot find (the card's image lacks some, and a step
    that imports one late would fail minutes in: tenacity did on 2026-12-06)."""
    import re
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in deps]
    serve_only = {"fastapi", "uvicorn"}  # `kernelsmith serve`'s web page; no step of the proof starts it
    return [n for n in names if n not in serve_only and _version(n) == "-"]


def _redo_steps(ap: argparse.ArgumentParser, flag: str, names: list[str], state: State) -> None:
    """Each named step marked to run again; a name that is not a step's is one line and exit 2."""
    known = [s.name for s in STEPS]
    for name in names:
        if name not in known:
            ap.error(f"{flag} {name}: the steps are {', '.join(known)}")
        redo(state, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="where this call writes (proof/ under it) [default: $OUT]")
    ap.add_argument("--results", type=Path, help=f"the committed results [default: {RESULTS.relative_to(REPO)}]")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds this call may use [default: 540]")
    ap.add_argument("--dry-run", action="store_true", help="CPU: each step's plumbing at tiny sizes, or its skip")
    ap.add_argument("--step", action="append", help="run this step (again), whatever its state; may repeat")
    ap.add_argument("--plan", action="store_true", help="print the steps and their state, run nothing")
    ap.add_argument(
        "--redo",
        action="append",
        metavar="STEP",
        help="here, not on the card: mark this step to run again on the next call (a commit that waits for it), "
        "in the committed state; run nothing; may repeat",
    )
    ap.add_argument("--take", type=Path, metavar="FILES_AT", help="copy a call's results into the repo")
    args = ap.parse_args(argv)
    if args.take:
        return take(args.take, args.results or RESULTS)
    out_root = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    if out_root is None and not (args.plan or args.redo):
        ap.error("--out (or $OUT) is required")
    results = args.results or ((out_root / "proof") if args.dry_run and out_root else RESULTS)
    state = State.load(results / "state.json")
    if args.redo:
        _redo_steps(ap, "--redo", args.redo, state)
        (results / "state.json").write_text(state.to_json())
    if args.plan or args.redo:
        print(plan(state, STEPS))
        return 0
    assert out_root is not None
    if not args.dry_run and (missing := missing_dependencies()):
        print(f"[proof] not run: the card lacks {', '.join(missing)} (add their wheels to .whl: docs/benchmarks.md)")
        return 2
    t0 = time.monotonic()
    device = "cpu" if args.dry_run else "cuda"
    out = out_root / "proof"
    out.mkdir(parents=True, exist_ok=True)
    _redo_steps(ap, "--step", args.step or [], state)
    work = Path(tempfile.mkdtemp(prefix="proof-work-"))
    ctx = Ctx(
        out=out,
        results=results,
        work=work,
        deadline=t0 + args.budget - WRITE_MARGIN,
        device=device,
        dry_run=args.dry_run,
        machine=machine(device),
        call=len(state.calls) + 1,
        python=sys.executable,
    )
    call = {"n": ctx.call, **ctx.machine, "budget_s": args.budget, "dry_run": args.dry_run, "steps": []}
    state.calls.append(call)
    say(f"call {ctx.call}: {ctx.machine['card']}, torch {ctx.machine['torch']}, budget {args.budget:.0f} s")
    call["steps"] = run_call(ctx, state, STEPS, args.step)
    call["seconds"] = round(time.monotonic() - t0)
    (out / "state.json").write_text(state.to_json())
    print(plan(state, STEPS), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
