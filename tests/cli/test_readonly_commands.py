"""The reading commands (`export`, `report`, `runs`, `data sft|rl`) on files that are not good run
stores, run as a user runs them: they never change the file, and say so in one line with exit 2."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, case_path

from kernelsmith.evolve.program import Program, score_of
from kernelsmith.evolve.store import STORE_NAME, RunStore
from kernelsmith.task import Task

KERNELSMITH = Path(sys.executable).parent / "kernelsmith"
TASK = case_path("elementwise_task")


def ks(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(KERNELSMITH), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def assert_one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    assert "Traceback" not in p.stderr + p.stdout and p.stdout == "", (p.stdout[-2000:], p.stderr[-3000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


def make_run(run_dir: Path, programs: int = 3) -> Path:
    """A valid store written directly: the seed, then faster and faster rewrites (made-up verdicts)."""
    source = TASK.read_text()
    store = RunStore(run_dir)
    store.set_meta("task_name", "elementwise")
    store.set_meta("task_hash", Task.from_source(source).hash)
    store.set_meta("task_source", source)
    store.set_meta("created_at", 1.0)
    for i in range(programs):
        speedup = 1.0 + i / 10
        store.add(
            Program(
                iteration=i,
                island=0,
                operator="seed" if i == 0 else "rewrite",
                parent_id=i if i else None,
                code=f"# program {i}\n" + "x = 1\n" * 300,
                status="correct",
                speedup=speedup,
                score=score_of("correct", [], speedup),
                messages=None if i == 0 else [{"role": "user", "content": f"improve {i}"}],
                response=None if i == 0 else f"reply {i}",
                model=None if i == 0 else "m",
            )
        )
    store.close()  # the last connection: the -wal file is folded in and removed
    assert not (run_dir / f"{STORE_NAME}-wal").exists()
    return run_dir


def reading_commands(run_dir: Path, tmp: Path) -> list[list]:
    return [
        ["export", run_dir],
        ["report", run_dir],
        ["report", run_dir, "--out", tmp / "r.html"],
        ["data", "sft", run_dir, "--out", tmp / "sft.jsonl"],
        ["data", "rl", run_dir, "--out", tmp / "rl.jsonl"],
    ]


def assert_every_reading_command_refuses(run_dir: Path, tmp: Path, needle: str) -> None:
    """Each reading command: one line, exit 2, and the run directory byte for byte as it was."""
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    for args in reading_commands(run_dir, tmp):
        assert_one_line_error(ks(*args), str(run_dir / STORE_NAME), needle)
        assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before, args  # no -wal, -shm, report.html
    assert not [p.name for p in tmp.iterdir() if p.suffix in (".html", ".jsonl", ".tmp")]


def other_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('not a kernelsmith run')")
    db.commit()
    db.close()


@pytest.mark.parametrize("kind", ["empty", "text", "other_database"])
def test_a_file_that_is_not_a_run_store_is_never_written(tmp_path, kind):
    root = tmp_path / "runs"
    good = make_run(root / "good")
    bad = root / "bad"
    bad.mkdir()
    if kind == "other_database":
        other_database(bad / STORE_NAME)
    else:
        (bad / STORE_NAME).write_bytes(b"" if kind == "empty" else b"these are notes, not a database\n")
    assert_every_reading_command_refuses(bad, tmp_path, "not a")
    before = (bad / STORE_NAME).read_bytes()
    listed = ks("runs", root, "--json")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert [Path(r["run_dir"]).name for r in json.loads(listed.stdout.strip().splitlines()[-1])] == ["good"]
    assert "bad" not in ks("runs", root).stdout
    assert (bad / STORE_NAME).read_bytes() == before
    # the same commands on the good run, for contrast: they read it and leave its store alone
    store_bytes = (good / STORE_NAME).read_bytes()
    export = ks("export", good)
    assert export.returncode == 0 and len(export.stdout.splitlines()) == 3, export.stderr[-3000:]
    assert (good / STORE_NAME).read_bytes() == store_bytes


def damage_the_middle(path: Path) -> None:
    """Overwrite one whole page in the middle of the file, as a bad disk or a torn copy would."""
    data = bytearray(path.read_bytes())
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    start = (len(data) // 2) // page * page
    data[start : start + page] = b"\xff" * page
    path.write_bytes(bytes(data))


def undecodable_row(path: Path) -> None:
    """A row whose bytes are valid SQLite but whose JSON column is not JSON."""
    db = sqlite3.connect(path)
    db.execute("UPDATE programs SET flags = '[\"torch_fallback' WHERE iteration = 1")
    db.commit()
    db.close()


@pytest.mark.parametrize("damage", [damage_the_middle, undecodable_row])
def test_a_damaged_store_is_one_line_for_every_reading_command(tmp_path, damage):
    root = tmp_path / "runs"
    run = make_run(root / "run", programs=60)
    damage(run / STORE_NAME)
    assert_every_reading_command_refuses(run, tmp_path, "not a readable run store")
    listed = ks("runs", root, "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout.strip().splitlines()[-1]) == [], listed.stderr[-3000:]


def test_report_out_a_directory_writes_report_html_inside_it(tmp_path):
    run = make_run(tmp_path / "run")
    out = tmp_path / "pages"
    out.mkdir()
    p = ks("report", run, "--out", out)
    assert p.returncode == 0 and "Traceback" not in p.stderr, (p.stdout, p.stderr[-3000:])
    assert 'id="lineage"' in (out / "report.html").read_text()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pages", "run"]  # no pages.tmp
    # a place that cannot hold the page: one line, and nothing left behind
    (tmp_path / "a_file").write_text("x")
    p = ks("report", run, "--out", tmp_path / "a_file" / "report.html")
    assert_one_line_error(p, "cannot write", "a_file")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a_file", "pages", "run"]
