"""Timings of the eager reference and the torch.compile baseline, cached per (GPU, torch, task).

A search evaluates hundreds of candidates of one task; the reference needs timing once. SQLite, so
that several judge processes can share the file. The file is created by the first store, never by a
read: `--no-cache` (EvalOptions.use_baseline_cache=False) neither reads nor writes it, and leaves it
byte-identical. `kernelsmith cache` lists and clears entries.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.evaluate.options import cache_dir
from kernelsmith.evaluate.result import TimingStats

_TABLE = (
    "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, gpu TEXT, torch TEXT,"
    " task_hash TEXT, payload TEXT, created REAL DEFAULT (julianday('now')))"
)


@dataclass(frozen=True)
class CacheEntry:
    """One stored baseline, as `kernelsmith cache list` shows it."""

    key: str
    gpu: str
    torch: str
    task_hash: str
    created: str  # UTC, 'YYYY-MM-DD HH:MM:SS'
    reference_ms: float | None
    compile_ms: float | None
    method: str | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class BaselineCache:
    def __init__(self, path: Path | None = None):
        self.path = path or cache_dir() / "baselines.sqlite"

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if not create and not self.path.is_file():
            return None
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        if create:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_TABLE)
        return db

    @staticmethod
    def key(gpu: str, torch_version: str, task_hash: str, timing_key: str) -> str:
        return "|".join((gpu, torch_version, task_hash, timing_key))

    def get(self, key: str) -> dict | None:
        db = self._connect(create=False)
        if db is None:
            return None
        try:
            with db:
                row = db.execute("SELECT payload FROM baselines WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:  # a file without the table (made by hand, or half-made)
            return None
        finally:
            db.close()
        if row is None:
            return None
        payload = json.loads(row[0])
        for name, value in payload.items():
            if isinstance(value, dict) and "median_ms" in value:
                payload[name] = TimingStats(**value)
        return payload

    def put(self, key: str, gpu: str, torch_version: str, task_hash: str, payload: dict) -> None:
        """Store `payload`; TimingStats values are stored as their fields."""
        text = json.dumps({k: v.model_dump() if isinstance(v, TimingStats) else v for k, v in payload.items()})
        db = self._connect(create=True)
        assert db is not None
        try:
            with db:
                db.execute(
                    "INSERT OR REPLACE INTO baselines (key, gpu, torch, task_hash, payload) VALUES (?, ?, ?, ?, ?)",
                    (key, gpu, torch_version, task_hash, text),
                )
        finally:
            db.close()

    def entries(self) -> list[CacheEntry]:
        """Every stored baseline (measured ceilings of a GPU too), oldest first."""
        db = self._connect(create=False)
        if db is None:
            return []
        try:
            with db:
                rows = db.execute(
                    "SELECT key, gpu, torch, task_hash, payload, datetime(created) FROM baselines ORDER BY created"
                ).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            db.close()
        out = []
        for key, gpu, torch_version, task_hash, payload, created in rows:
            data = json.loads(payload)
            ref, comp = data.get("reference") or {}, data.get("compile") or {}
            out.append(
                CacheEntry(
                    key=key,
                    gpu=gpu,
                    torch=torch_version,
                    task_hash=task_hash,
                    created=str(created),
                    reference_ms=ref.get("median_ms") if isinstance(ref, dict) else None,
                    compile_ms=comp.get("median_ms") if isinstance(comp, dict) else None,
                    method=ref.get("method") if isinstance(ref, dict) else None,
                )
            )
        return out

    def clear(self, task_hash: str | None = None, gpu: str | None = None) -> int:
        """Remove the entries of a task (a prefix of its hash), of a GPU (its name), or all; how many."""
        db = self._connect(create=False)
        if db is None:
            return 0
        where, args = [], []
        if task_hash:
            where.append("task_hash LIKE ?")
            args.append(task_hash.replace("%", "").replace("_", "") + "%")
        if gpu:
            where.append("gpu = ?")
            args.append(gpu)
        sql = "DELETE FROM baselines" + (" WHERE " + " AND ".join(where) if where else "")
        try:
            with db:
                return db.execute(sql, args).rowcount
        except sqlite3.OperationalError:
            return 0
        finally:
            db.close()
