"""Timings of the eager reference and the torch.compile baseline, cached per (GPU, torch, task).

A search evaluates hundreds of candidates of one task; the reference needs timing once.
SQLite, so that several judge processes can share the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from kernelsmith.evaluate.result import TimingStats


def cache_dir() -> Path:
    root = os.environ.get("KERNELSMITH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelsmith"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


class BaselineCache:
    def __init__(self, path: Path | None = None):
        self.path = path or cache_dir() / "baselines.sqlite"
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, gpu TEXT, torch TEXT,"
                " task_hash TEXT, payload TEXT, created REAL DEFAULT (julianday('now')))"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    @staticmethod
    def key(gpu: str, torch_version: str, task_hash: str, timing_key: str) -> str:
        return "|".join((gpu, torch_version, task_hash, timing_key))

    def get(self, key: str) -> dict | None:
        with self._connect() as db:
            row = db.execute("SELECT payload FROM baselines WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        payload = json.loads(row[0])
        for name in ("reference", "compile"):
            if payload.get(name) is not None:
                payload[name] = TimingStats(**payload[name])
        return payload

    def put(self, key: str, gpu: str, torch_version: str, task_hash: str, payload: dict) -> None:
        """Store `payload`; TimingStats values are stored as their fields."""
        text = json.dumps({k: v.model_dump() if isinstance(v, TimingStats) else v for k, v in payload.items()})
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO baselines (key, gpu, torch, task_hash, payload) VALUES (?, ?, ?, ?, ?)",
                (key, gpu, torch_version, task_hash, text),
            )
