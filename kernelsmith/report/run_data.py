"""What the run report shows, read from a run directory without writing to it.

The store is opened read-only (an SQLite `mode=ro` URI), so a report can be made of a run that
is still going, or of a copy on a read-only disk, and can never damage the run.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.errors import UserError
from kernelsmith.evaluate.counters import CountersReport, counters_text
from kernelsmith.evaluate.measuring.breakdown import short_name
from kernelsmith.evaluate.measuring.noise import Floors, NoiseFloor, floors_of
from kernelsmith.evaluate.result import Status
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.program import NO_PROGRAM, Program, best_of, running_best, score_of, stored_order
from kernelsmith.evolve.store import NOISE_FLOOR, RunStore
from kernelsmith.report.archive_view import ArchiveView, archive_view, stored_id

ERROR_CHARS = 2000  # of an error, in the detail panel
PROFILE_KERNELS = 12  # kernels drawn per program in the profile chart
ERROR_LINE_CHARS = 150  # of its first line, in the table
REPLY_CHARS = 4000  # of the raw LLM reply, in the detail panel

# The colour class of a status (the page's stylesheet maps each to a colour).
_KINDS = {
    Status.correct.value: "correct",
    Status.incorrect.value: "incorrect",
    Status.compile_error.value: "compile",
    Status.runtime_error.value: "runtime",
    Status.timeout.value: "runtime",
    Status.rejected.value: "none",
    NO_PROGRAM: "none",
}


def kind_of(p: Program) -> str:
    """correct | flagged (correct but flagged) | incorrect | compile | runtime | none."""
    if p.status == Status.correct.value and not p.ok:
        return "flagged"
    return _KINDS.get(p.status, "none")


def _clip(text: str | None, n: int) -> str | None:
    return text if text is None or len(text) <= n else text[: n - 1] + "\u2026"


@dataclass
class ProgramRow:
    id: int
    iteration: int
    island: int
    operator: str
    parent_id: int | None
    inspiration_ids: list[int]
    model: str | None
    status: str
    kind: str
    depth: int  # parents above it (a starting program is 0)
    speedup: float | None
    speedup_vs_compile: float | None
    candidate_ms: float | None
    score: float
    flags: list[str]
    error: str | None
    error_line: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float | None
    descriptors: dict[str, float]
    code: str | None
    response: str | None


@dataclass
class DiffView:
    title: str
    lines: list[list[str]]  # [kind, text]: kind is file | hunk | add | del | ctx


@dataclass
class ProfileView:
    """Where a program's forward spends its device time (the verdict's kernel breakdown, CUDA)."""

    title: str
    id: int
    candidate_ms: float | None
    kernel_ms: float | None
    kernels: list[dict]  # {name (short), full, own, calls, ms, share}, heaviest first
    # Nsight Compute's counters of the heaviest kernels, when the program was profiled:
    # {name (short), full, launches, bottleneck, counters (one line)}; else why there are none.
    counters: list[dict] = field(default_factory=list)
    counters_note: str | None = None


@dataclass
class RunData:
    task_name: str | None
    task_source: str | None
    run_dir: str
    summary: dict | None  # summary.json as written, or None before the run first ends
    config: dict | None  # the parts of the run's config a reader wants (no URLs, no key paths)
    config_error: str | None
    programs: list[ProgramRow]
    best_id: int | None
    status_counts: dict[str, int]
    totals: dict[str, float]
    best_so_far: list[list[float]]  # [iteration, the run's best speedup by then], from the first success
    archive: ArchiveView | None
    diffs: list[DiffView] = field(default_factory=list)
    profiles: list[ProfileView] = field(default_factory=list)  # the best program and its parent
    speedup_note: str | None = None  # on the CPU: its speedups are relative only
    noise_note: str = ""  # the floor of the spread between evaluations this run's best rule used


def read_store(run_dir: Path) -> tuple[list[Program], dict]:
    """Every program (in stored order) and the meta table, through a read-only connection."""
    store = RunStore.open_readonly(run_dir)
    try:
        return store.all(), store.all_meta()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{store.path} is not a readable run store: {exc}") from None
    finally:
        store.close()


def _depths(programs: list[Program]) -> dict[int, int]:
    parent = {p.id: p.parent_id for p in programs}
    depth: dict[int, int] = {}
    for p in sorted(programs, key=stored_id):  # a parent is always stored before its child
        up = parent[p.id]
        depth[stored_id(p)] = depth[up] + 1 if up in depth else 0
    return depth


def noise_note(stored: dict | None) -> str:
    """What the chart's caption says of the run's noise floor: measured (on the CPU), assumed, or the
    floors of the timing methods."""
    if stored is None:
        return "Each time's noise is at least its timing method's floor (kernelsmith/evaluate/measuring/noise.py)."
    floor = NoiseFloor.model_validate(stored)
    times = ", ".join(f"{t:.3g}" for t in floor.times_ms)
    if floor.origin == "measured":
        return (
            f"This run's CPU timings move by {floor.relative:.0%} between evaluations, measured: iteration "
            f"{floor.iteration} evaluated {len(floor.times_ms)} times ({times} ms); each time's noise is at least that."
        )
    return f"This run's CPU noise floor, {floor.relative:.0%}, is assumed: {floor.note}."


def best_so_far(programs: list[Program], floors: Floors | None = None) -> list[list[float]]:
    """[iteration, the best's speedup] after each program from the first success, in the order the
    search stored them (`best_of`'s walk, so the line ends at the run's best): the iteration is the
    highest stored so far, as iterations in flight may be stored out of order."""
    out, last = [], None
    ordered = sorted(programs, key=stored_order)
    for p, best in zip(ordered, running_best(ordered, floors)):
        last = p.iteration if last is None else max(last, p.iteration)
        if best is not None:
            out.append([last, score_of(best.status, best.flags, best.speedup)])
    return out


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> list[list[str]]:
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""):
        if line.startswith(("---", "+++")) and len(lines) < 2:
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        lines.append([kind, line])
    return lines


def _diffs(best: Program | None, by_id: dict[int, Program], programs: list[Program]) -> list[DiffView]:
    if best is None or best.code is None:
        return []
    out = []
    start = next((p for p in programs if p.iteration == 0), None)
    parent = by_id.get(best.parent_id) if best.parent_id is not None else None
    for other, role in ((parent, "its parent"), (start, "the starting program")):
        if other is None or other.code is None or other.id == best.id:
            continue
        title = f"program {best.id} (best) against {role}, program {other.id} (iteration {other.iteration})"
        out.append(DiffView(title, unified_diff(other.code, best.code, f"program {other.id}", f"program {best.id}")))
    return out


def profile_view(p: Program, role: str) -> ProfileView | None:
    """The kernel breakdown of `p`'s verdict, if it has one (a correct program on CUDA)."""
    ev = p.eval or {}
    kernels = [k for k in ev.get("kernels") or [] if k.get("ms") is not None]
    if p.status != Status.correct.value or not kernels:
        return None
    rows = [
        {
            "name": short_name(k["name"]),
            "full": k["name"],
            "own": bool(k.get("own")),
            "calls": k.get("calls"),
            "ms": k["ms"],
            "share": k.get("share"),
        }
        for k in kernels[:PROFILE_KERNELS]
    ]
    title = f"program {stored_id(p)} ({role}, iteration {p.iteration})"
    counters, note = _counters_rows(ev.get("counters"))
    return ProfileView(title, stored_id(p), p.candidate_ms, ev.get("kernel_ms"), rows, counters, note)


def _counters_rows(raw) -> tuple[list[dict], str | None]:
    if not raw:
        return [], None
    try:
        rep = CountersReport.model_validate(raw)
    except ValueError:
        return [], "counters record unreadable"
    if rep.status != "ok":
        return [], rep.summary()
    rows = [
        {
            "name": short_name(k.name),
            "full": k.name,
            "launches": k.launches,
            "bottleneck": k.bottleneck(),
            "counters": counters_text(k),
        }
        for k in rep.kernels
    ]
    return rows, None


def _profiles(best: Program | None, by_id: dict[int, Program]) -> list[ProfileView]:
    if best is None:
        return []
    parent = by_id.get(best.parent_id) if best.parent_id is not None else None
    views = [profile_view(best, "best")] + ([profile_view(parent, "its parent")] if parent is not None else [])
    return [v for v in views if v is not None]


def mutator_text(cfg: EvolveConfig) -> str:
    """Who proposes the children: the LLM models, the launch-parameter tuner, or both (a tuner run
    keeps the config's default model name, which no request ever used)."""
    tuner = "launch-parameter tuner"
    if not cfg.operators.uses_llm:
        return f"{tuner} (no LLM)"
    llm = "LLM: " + ", ".join(m.name for m in cfg.llm.models)
    return f"{llm}; {tuner}" if cfg.operators.tune > 0 else llm


def _config_view(cfg: EvolveConfig) -> dict:
    return {
        "iterations": cfg.iterations,
        "max_in_flight": cfg.max_in_flight,
        "random_seed": cfg.random_seed,
        "early_stop": cfg.early_stop,
        "max_cost": cfg.max_cost,
        "max_tokens": cfg.max_tokens,
        "time_limit": cfg.time_limit,
        "device": cfg.evaluation.device,
        "mutator": mutator_text(cfg),
        "operators": cfg.operators.model_dump(),
        "archive": cfg.archive.model_dump(),
    }


def _row(p: Program, depth: int) -> ProgramRow:
    first_line = (p.error or "").strip().splitlines()[0] if (p.error or "").strip() else ""
    return ProgramRow(
        id=stored_id(p),
        iteration=p.iteration,
        island=p.island,
        operator=p.operator,
        parent_id=p.parent_id,
        inspiration_ids=list(p.inspiration_ids),
        model=p.model,
        status=p.status,
        kind=kind_of(p),
        depth=depth,
        speedup=p.speedup,
        speedup_vs_compile=p.speedup_vs_compile,
        candidate_ms=p.candidate_ms,
        score=p.score,
        flags=list(p.flags),
        error=_clip(p.error, ERROR_CHARS),
        error_line=_clip(first_line, ERROR_LINE_CHARS) or "",
        prompt_tokens=p.prompt_tokens,
        completion_tokens=p.completion_tokens,
        cost=p.cost,
        latency_s=p.latency_s,
        descriptors=dict(p.descriptors),
        code=p.code,
        response=_clip(p.response, REPLY_CHARS),
    )


def read_summary(run_dir: Path) -> dict | None:
    """summary.json as the run last wrote it; None before the run first ends."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable JSON: {exc}") from None


def load_run(run_dir: str | Path) -> RunData:
    run_dir = Path(run_dir)
    programs, meta = read_store(run_dir)
    config = config_error = None
    view = None
    if meta.get("config") is None:
        config_error = "the store holds no config, so the archive cannot be rebuilt"
    else:
        try:
            cfg = EvolveConfig.model_validate(meta["config"])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
            config_error = (
                f"the stored config does not validate ({where}: {first['msg']}), so the archive cannot be rebuilt"
            )
        else:
            config, view = _config_view(cfg), archive_view(programs, cfg.archive)
    floors = floors_of(meta.get(NOISE_FLOOR))
    best = best_of(programs, floors)
    by_id = {stored_id(p): p for p in programs}
    depth = _depths(programs)
    counts: dict[str, int] = {}
    for p in programs:
        counts[p.status] = counts.get(p.status, 0) + 1
    totals = {
        "prompt_tokens": sum(p.prompt_tokens for p in programs),
        "completion_tokens": sum(p.completion_tokens for p in programs),
        "cost": sum(p.cost for p in programs),
    }
    return RunData(
        task_name=meta.get("task_name"),
        task_source=meta.get("task_source"),
        run_dir=str(run_dir),
        summary=read_summary(run_dir),
        config=config,
        config_error=config_error,
        programs=[_row(p, depth[stored_id(p)]) for p in programs],
        best_id=best.id if best else None,
        status_counts=dict(sorted(counts.items())),
        totals=totals,
        best_so_far=best_so_far(programs, floors),
        archive=view,
        diffs=_diffs(best, by_id, programs),
        speedup_note=CPU_SPEEDUP_NOTE if config is not None and config["device"] == "cpu" else None,
        noise_note=noise_note(meta.get(NOISE_FLOOR)),
        profiles=_profiles(best, by_id),
    )
