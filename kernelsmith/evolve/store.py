"""The run store: one SQLite file per run directory, one row per evaluated program.

Each program is committed in its own transaction the moment its verdict exists (WAL journal,
synchronous=FULL), so killing the process at any point loses no evaluated program and leaves
a consistent file: SQLite's journal makes a half-written row impossible. `iteration` is
UNIQUE, so a resumed run can never store an iteration twice.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.evaluate.measuring.noise import floors_of
from kernelsmith.evolve.program import Program, best_of

STORE_NAME = "run.sqlite"
NOISE_FLOOR = "noise_floor"  # the meta key of the run's measured noise floor (evolve/noise_floor.py)


def holds_run(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run's store (a search there resumes it)."""
    return (Path(run_dir) / STORE_NAME).is_file()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
    id INTEGER PRIMARY KEY,
    iteration INTEGER NOT NULL UNIQUE,
    island INTEGER NOT NULL,
    operator TEXT NOT NULL,
    parent_id INTEGER REFERENCES programs(id),
    inspiration_ids TEXT NOT NULL,
    model TEXT,
    messages TEXT,
    response TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    latency_s REAL,
    code TEXT,
    code_hash TEXT,
    status TEXT NOT NULL,
    correct INTEGER NOT NULL,
    speedup REAL,
    speedup_vs_compile REAL,
    candidate_ms REAL,
    flags TEXT NOT NULL,
    error TEXT,
    descriptors TEXT NOT NULL,
    skeleton TEXT,
    config TEXT,
    eval TEXT,
    score REAL NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS programs_island ON programs(island, id);
"""

_JSON_COLS = ("inspiration_ids", "messages", "flags", "descriptors", "config", "eval")
_COLS = (
    "iteration",
    "island",
    "operator",
    "parent_id",
    "inspiration_ids",
    "model",
    "messages",
    "response",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "latency_s",
    "code",
    "code_hash",
    "status",
    "correct",
    "speedup",
    "speedup_vs_compile",
    "candidate_ms",
    "flags",
    "error",
    "descriptors",
    "skeleton",
    "config",
    "eval",
    "score",
    "created_at",
)


@dataclass(frozen=True)
class ArchiveRow:
    """A stored program as the archive and the tuner replay it on resume (no code, no messages)."""

    id: int
    iteration: int
    island: int
    status: str
    flags: list[str]
    score: float
    descriptors: dict
    has_code: bool
    skeleton: str | None
    config: dict | None


class RunStore:
    def __init__(self, run_dir: str | Path, create: bool = True):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_NAME
        if not create and not self.path.is_file():
            raise UserError(f"{self.run_dir} is not a run directory (no {STORE_NAME})")
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, isolation_level=None)  # autocommit; explicit transactions
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA busy_timeout=10000")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path} is not a usable run store: {exc}") from None
        except OSError as exc:
            raise UserError(f"cannot create the run directory {self.run_dir}: {exc.strerror}") from None

    @classmethod
    def open_readonly(cls, run_dir: str | Path) -> RunStore:
        """The store of an existing run, on a read-only connection: reports and data exports can
        read a run that is still going, or a copy on a read-only disk, and never change it.

        Without a -wal file every row is in the main file and nobody is writing, so the file is
        opened immutable, which creates no -wal/-shm beside it; with one, reads go through it."""
        run_dir = Path(run_dir)
        path = run_dir / STORE_NAME
        if not run_dir.is_dir():
            raise UserError(f"run directory not found: {run_dir} (not a run directory)")
        if not path.is_file():
            raise UserError(f"{run_dir} is not a run directory (no {STORE_NAME})")
        live = path.with_name(path.name + "-wal").exists()
        db = None
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro{'' if live else '&immutable=1'}", uri=True)
            db.execute("PRAGMA busy_timeout=10000")
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            raise UserError(f"{path} is not a readable run store: {exc}") from None
        if not {"meta", "programs"} <= tables:  # an empty file, or another program's database
            db.close()
            raise UserError(f"{path} is not a run store (no meta and programs tables)")
        store = cls.__new__(cls)
        store.run_dir, store.path, store.db = run_dir, path, db
        return store

    # ---- meta: the task, the config, run-wide facts
    def get_meta(self, key: str):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def all_meta(self) -> dict:
        return {key: json.loads(value) for key, value in self.db.execute("SELECT key, value FROM meta")}

    def set_meta(self, key: str, value) -> None:
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    # ---- programs
    def add(self, program: Program) -> Program:
        """Commit one program; sets and returns it with its id."""
        program.created_at = program.created_at or time.time()
        values = []
        for col in _COLS:
            v = program.code_hash if col == "code_hash" else getattr(program, col)
            if col in _JSON_COLS:
                v = json.dumps(v)
            elif col == "correct":
                v = int(bool(v))
            values.append(v)
        marks = ", ".join("?" for _ in _COLS)
        try:
            cur = self.db.execute(f"INSERT INTO programs({', '.join(_COLS)}) VALUES ({marks})", values)
        except sqlite3.IntegrityError as exc:
            raise RuntimeError(f"iteration {program.iteration} is stored already: {exc}") from None
        program.id = cur.lastrowid
        return program

    def remove_start(self) -> None:
        """Delete iteration 0: a start replaced before any iteration after it was stored (evolve/start.py),
        and the noise floor measured on it (the new start's is measured)."""
        self.db.execute("DELETE FROM programs WHERE iteration = 0")
        self.db.execute("DELETE FROM meta WHERE key = ?", (NOISE_FLOOR,))

    def set_counters(self, program_id: int, counters: dict) -> None:
        """Add the counters stage's report to a stored program's verdict record (eval.counters)."""
        row = self.db.execute("SELECT eval FROM programs WHERE id = ?", (program_id,)).fetchone()
        if row is None or row[0] is None:
            return
        ev = json.loads(row[0]) or {}
        ev["counters"] = counters
        self.db.execute("UPDATE programs SET eval = ? WHERE id = ?", (json.dumps(ev), program_id))

    @staticmethod
    def _row(row: sqlite3.Row) -> Program:
        d = dict(row)
        try:
            for col in _JSON_COLS:
                d[col] = json.loads(d[col]) if d[col] is not None else None
        except (ValueError, TypeError) as exc:
            # Damaged bytes can still form a row: report it as the damaged store it is.
            raise sqlite3.DatabaseError(f"program {d.get('id')} is malformed ({col}: {exc})") from None
        d["inspiration_ids"] = d["inspiration_ids"] or []
        d["flags"] = d["flags"] or []
        d["descriptors"] = d["descriptors"] or {}
        d["correct"] = bool(d["correct"])
        d.pop("code_hash")
        return Program(**d)

    def _query(self, sql: str, args=()) -> list[Program]:
        self.db.row_factory = sqlite3.Row
        try:
            return [self._row(r) for r in self.db.execute(sql, args)]
        finally:
            self.db.row_factory = None

    def get(self, program_id: int) -> Program:
        rows = self._query("SELECT * FROM programs WHERE id = ?", (program_id,))
        if not rows:
            raise KeyError(program_id)
        return rows[0]

    def at_iteration(self, iteration: int) -> Program | None:
        rows = self._query("SELECT * FROM programs WHERE iteration = ?", (iteration,))
        return rows[0] if rows else None

    def get_many(self, ids: list[int]) -> list[Program]:
        return [self.get(i) for i in ids]

    def all(self) -> list[Program]:
        return self._query("SELECT * FROM programs ORDER BY id")

    def eval_records(self) -> list[dict | None]:
        """Every program's verdict record (`eval`; None where it holds no program), in id order."""
        return [
            json.loads(r[0]) if r[0] is not None else None
            for r in self.db.execute("SELECT eval FROM programs ORDER BY id")
        ]

    def recent(self, n: int, island: int | None = None) -> list[Program]:
        """The last `n` programs stored (on one island), newest first."""
        if island is None:
            return self._query("SELECT * FROM programs ORDER BY id DESC LIMIT ?", (n,))
        return self._query("SELECT * FROM programs WHERE island = ? ORDER BY id DESC LIMIT ?", (island, n))

    def archive_rows(self) -> list[ArchiveRow]:
        """Every program in id order, as the archive and the tuner need it, without the heavy columns."""
        return [
            ArchiveRow(
                id=r[0],
                iteration=r[1],
                island=r[2],
                status=r[3],
                flags=json.loads(r[4]),
                score=r[5],
                descriptors=json.loads(r[6]),
                has_code=bool(r[7]),
                skeleton=r[8],
                config=json.loads(r[9]) if r[9] else None,
            )
            for r in self.db.execute(
                "SELECT id, iteration, island, status, flags, score, descriptors, "
                "code IS NOT NULL, skeleton, config FROM programs ORDER BY id"
            )
        ]

    def iterations(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT iteration FROM programs")}

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM programs").fetchone()[0]

    def status_counts(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT status, COUNT(*) FROM programs GROUP BY status ORDER BY status"))

    def totals(self) -> dict:
        p, c, cost = self.db.execute(
            "SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
            "COALESCE(SUM(cost), 0) FROM programs"
        ).fetchone()
        return {"prompt_tokens": p, "completion_tokens": c, "cost": cost}

    def noise_floors(self) -> dict[str, float]:
        """The run's measured noise floors ({} when it measured none): method -> relative floor."""
        return floors_of(self.get_meta(NOISE_FLOOR))

    def best(self) -> Program | None:
        """The run's best (`best_of`): the first success, replaced only by a later one that is faster
        beyond both programs' timing noise (the run's measured floors where it has them)."""
        return best_of(self._query("SELECT * FROM programs WHERE status = 'correct'"), self.noise_floors())

    def close(self) -> None:
        self.db.close()
