"""The GPU proof's pieces that every step shares: its state (which steps are done, kept in the repo),
a step's outcome, the call's context (where to write, how much time is left) and the helpers that run
a command within that time.

The state lives in benchmarks/results/proof/state.json, committed: every device call starts from a
fresh copy of the repo, so "done" must be in the repo. A call reads it, runs the first steps not
finished, and writes the updated state beside its results under $OUT/proof/; the lead copies that
folder over benchmarks/results/proof/ (`proof.py --take`), which advances it. A step with many rows
(seeds on 100 problems, tuner runs on 20) keeps them in its own rows.jsonl there, all rows so far.

state.json: {"format": 1, "calls": [one record per device call: n, date, card, torch, triton, commit,
budget_s, seconds, steps], "steps": {name: {"status", "attempts", "stalls", "rows_done", "rows_total",
"note", "history": [one record per call that ran it: call, date, card, seconds, status, note]}}}.
A step's status: pending (never run), partial (rows left: the next call goes on), retry (it timed out
or broke: the next call runs it again, MAX_ATTEMPTS in all), done, skipped (cannot run here, said why),
failed (broke MAX_ATTEMPTS times, or a row step made no progress in MAX_ATTEMPTS calls): passed over.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

FORMAT = 1
FINISHED = frozenset({"done", "skipped", "failed"})
MAX_ATTEMPTS = 2
MAX_FILES = 8  # the device tool returns at most 8 files from $OUT
REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "proof"


@dataclass
class StepState:
    status: str = "pending"
    attempts: int = 0  # calls that ran it
    stalls: int = 0  # calls in a row in which a row step added no row
    rows_done: int | None = None
    rows_total: int | None = None
    note: str = ""
    history: list[dict] = field(default_factory=list)


@dataclass
class State:
    steps: dict[str, StepState] = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)
    format: int = FORMAT

    def step(self, name: str) -> StepState:
        return self.steps.setdefault(name, StepState())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def load(cls, path: Path) -> State:
        """The state at `path`; a missing file is a proof not yet begun."""
        if not path.is_file():
            return cls()
        raw = json.loads(path.read_text())
        if raw.get("format") != FORMAT:
            raise ValueError(f"{path}: state format {raw.get('format')!r}, this driver reads {FORMAT}")
        steps = {k: StepState(**v) for k, v in raw.get("steps", {}).items()}
        return cls(steps=steps, calls=list(raw.get("calls", [])))


@dataclass
class Outcome:
    """What one call of a step did. status: done | partial | skipped | timeout | error."""

    status: str
    note: str  # one line
    summary: str = ""  # markdown: the step's figures so far (all rows, for a row step)
    rows_done: int | None = None
    rows_total: int | None = None
    new_rows: int = 0


def pending(order: Iterable[str], state: State) -> list[str]:
    """The steps not finished, in the proof's order: the first is the next to run."""
    return [name for name in order if state.step(name).status not in FINISHED]


def record(state: State, name: str, outcome: Outcome, call: dict) -> StepState:
    """The step's state after a call that ran it (and one line of its history)."""
    s = state.step(name)
    s.attempts += 1
    s.note = outcome.note
    if outcome.rows_total is not None:
        s.rows_done, s.rows_total = outcome.rows_done, outcome.rows_total
    if outcome.status == "partial" or (outcome.status in ("timeout", "error") and outcome.new_rows):
        s.stalls = 0 if outcome.new_rows else s.stalls + 1
        s.status = "failed" if s.stalls >= MAX_ATTEMPTS else "partial"
    elif outcome.status in ("timeout", "error"):
        s.stalls += 1
        s.status = "failed" if s.stalls >= MAX_ATTEMPTS else "retry"
    else:
        s.stalls = 0
        s.status = outcome.status
    keys = ("n", "date", "card")
    s.history.append({**{k: call.get(k) for k in keys}, "status": outcome.status, "note": outcome.note})
    return s


def redo(state: State, name: str) -> None:
    """Run `name` again from its start on the next call (its history stays)."""
    s = state.step(name)
    s.status, s.stalls, s.rows_done, s.rows_total, s.note = "pending", 0, None, None, "asked to run again"


# ---- rows: a step of many rows, resumable by row -------------------------------------------------


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def merge_rows(old: list[dict], new: list[dict], key: str = "task") -> list[dict]:
    """All rows, one per key: a new row replaces an old one of the same key, in place; others follow."""
    merged = {r[key]: r for r in old}
    merged.update({r[key]: r for r in new})
    return list(merged.values())


def rows_left(plan: list[str], rows: list[dict], key: str = "task") -> list[str]:
    """The plan's keys without a final row (a row is final unless it says "final": false)."""
    final = {r[key] for r in rows if r.get("final", True)}
    return [k for k in plan if k not in final]


def write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ---- the call's context ---------------------------------------------------------------------------


@dataclass
class Ctx:
    out: Path  # $OUT/proof: state.json and one folder per step that ran
    results: Path  # the committed results: benchmarks/results/proof (read only, but for a dry run's own)
    work: Path  # scratch (not returned)
    deadline: float  # clock() value after which nothing may run
    device: str = "cuda"
    dry_run: bool = False
    machine: dict = field(default_factory=dict)
    call: int = 1  # this device call's number in the proof
    clock: Callable[[], float] = time.monotonic
    python: str = "python3"
    kernelbench: Path = REPO / ".kernelbench" / "KernelBench"
    attempt: int = 1  # the running step's attempt (1: its first call)
    found: dict[str, int] = field(default_factory=dict)  # the files under `out` when the call began: mtimes

    def __post_init__(self) -> None:
        self.found = self.found or snapshot(self.out)

    def files_written(self) -> int:
        """The files this call wrote under `out` (a dry run writes where its earlier calls did)."""
        return sum(1 for k, v in snapshot(self.out).items() if self.found.get(k) != v)

    def left(self) -> float:
        return self.deadline - self.clock()

    def step_out(self, name: str) -> Path:
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def step_results(self, name: str) -> Path:
        """What earlier calls of the step left in the committed results."""
        return self.results / name

    def step_work(self, name: str) -> Path:
        d = self.work / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(REPO)) if p)
        return env | extra


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else {}


@dataclass
class Ran:
    rc: int | None  # None: killed at its time limit
    seconds: float
    log: Path


def run_logged(cmd: list[str], log: Path, limit: float, env: dict[str, str] | None = None, cwd: Path = REPO) -> Ran:
    """`cmd` in its own process group, its output appended to `log`; the whole group killed at `limit`
    seconds (a script's children, Inductor's compile workers, sandboxes), so the call keeps its time."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}   (limit {limit:.0f} s)\n")
        sink.flush()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc = None
        seconds = time.monotonic() - t0
        sink.write(f"[exit {rc if rc is not None else 'killed at the time limit'}, {seconds:.0f} s]\n")
    return Ran(rc, seconds, log)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(path: Path, lines: int = 20, drop: tuple[str, ...] = ("USDT", "UserWarning", "_warn_once")) -> str:
    """The last lines of a log, without CUDA's probe lines and run_logged's own (the command, the exit)."""
    if not path.is_file():
        return ""
    kept = [
        ln
        for ln in path.read_text(errors="replace").splitlines()
        if ln.strip() and not any(d in ln for d in drop) and not ln.startswith(("$ ", "[exit "))
    ]
    return "\n".join(kept[-lines:])


def copy_text(src: Path, dst: Path, drop: tuple[str, ...] = ("USDT",)) -> bool:
    """A log copied without the lines every CUDA process prints (USDT probes); False when there is none."""
    if not src.is_file():
        return False
    kept = [ln for ln in src.read_text(errors="replace").splitlines() if not any(d in ln for d in drop)]
    dst.write_text("\n".join(kept) + "\n")
    return True
