"""Self-contained HTML pages of a suite: `write_suite_report` for a `kernelsmith bench` result
(the summary metrics, overall and per level, a bar per task and the per-task table), and
`write_evolve_suite_report` for `kernelsmith evolve-suite`, which adds each task's search: its
starting program against the best one found, with a link to the task's run report."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.errors import UserError
from kernelsmith.evolve.store import RunStore, holds_run
from kernelsmith.report.page import out_path, render_page, write_atomic
from kernelsmith.report.run_data import read_summary
from kernelsmith.report.run_report import REPORT_NAME
from kernelsmith.suite.bench import BenchReport
from kernelsmith.suite.evolve_suite import task_run_dir

SUITE_REPORT_NAME = "suite_report.html"

# Trusted markup only; suite.js fills it from the data blob.
_SEARCHES = """<section><h2>Search per task: seed against best</h2>
<p class="note">As each search measured them: the starting program (iteration 0: the seeds file, or the
LLM's translation) and the best correct, unflagged program found; gain is best over seed. The task name
links to its run report. The sections below evaluate each best program afresh.</p>
<div class="table-scroll"><table id="search-table" class="data"><thead></thead><tbody></tbody></table></div>
</section>
"""

_BENCH = """<section><h2>{summary}</h2><div class="cards" id="headline"></div>
<h3>fast_p: the share of all tasks that are correct and faster than p times the baseline</h3><div id="fastp"></div>
<h3>Per level</h3><div id="levels"></div></section>
<section><h2>Speedup per task</h2>
<p class="note">Bars start at 1&times; (as fast as eager PyTorch);
failed tasks are marked &#x2716; with their status.</p>
<div class="scroll"><svg id="suite-chart" role="img" aria-label="speedup per task"></svg></div></section>
<section><h2>Tasks</h2><div class="table-scroll">
<table id="suite-table" class="data"><thead></thead><tbody></tbody></table></div><div id="skipped"></div></section>
"""


def _body(heading: str, searches: bool, summary: str) -> str:
    head = f'<header><h1 id="title">{heading}</h1><p id="subtitle"></p></header>\n<main>\n'
    return head + (_SEARCHES if searches else "") + _BENCH.format(summary=summary) + "</main>"


@dataclass
class TaskSearch:
    """One task's search as its run directory tells it (summary.json's `start` and `best`)."""

    task: str
    run_dir: str
    report: str | None  # the run report, relative to the suite page (URL-quoted); None when absent
    iterations_done: int | None
    stop_reason: str | None
    seed: dict | None
    best: dict | None
    note: str | None  # why there is nothing to compare


def _why_no_summary(run_dir: Path) -> str:
    if not holds_run(run_dir):
        return "not searched (the command's output says why)"
    try:
        store = RunStore.open_readonly(run_dir)
    except UserError as exc:
        return str(exc)
    try:
        stored = store.count()
    except sqlite3.DatabaseError as exc:
        return f"{store.path} is not a readable run store: {exc}"
    finally:
        store.close()
    if stored == 0:
        return "nothing stored: the search did not start (the command's output says why)"
    return "no summary.json: the search has not ended"


def task_searches(report: BenchReport, runs_dir: Path, page: Path) -> list[TaskSearch]:
    """The search of every task of `report` below `runs_dir`, with links relative to `page`."""
    out = []
    for row in report.rows:
        run_dir = task_run_dir(runs_dir, row.task)
        html = run_dir / REPORT_NAME
        link = quote(Path(os.path.relpath(html, page.parent)).as_posix()) if html.is_file() else None
        try:
            summary, note = read_summary(run_dir), None
        except UserError as exc:
            summary, note = None, str(exc)
        if summary is None and note is None:
            note = _why_no_summary(run_dir)
        s = summary or {}
        out.append(
            TaskSearch(
                task=row.task,
                run_dir=str(run_dir),
                report=link,
                iterations_done=s.get("iterations_done"),
                stop_reason=s.get("stop_reason"),
                seed=s.get("start"),
                best=s.get("best"),
                note=note,
            )
        )
    return out


def _write(report: BenchReport, out: Path, title: str, body: str, extra: dict) -> Path:
    note = CPU_SPEEDUP_NOTE if report.device == "cpu" else None
    data = {**report.model_dump(mode="json"), "title": title, "speedup_note": note, **extra}
    page = render_page(title, body, data, scripts=["common.js", "suite.js"], styles=["report.css"])
    return write_atomic(out, page)


def write_suite_report(report: BenchReport, out: Path) -> Path:
    """Write the HTML report of a suite benchmark to `out` (a directory gets a suite_report.html
    inside) and return its path."""
    title = f"kernelsmith bench: {report.suite}"
    body = _body("kernelsmith bench", searches=False, summary="Summary")
    return _write(report, out_path(out, SUITE_REPORT_NAME), title, body, {"runs_dir": None, "searches": None})


def write_evolve_suite_report(report: BenchReport, runs_dir: Path, out: Path) -> Path:
    """Write the HTML report of `kernelsmith evolve-suite` (its benchmark `report`, and the runs
    below `runs_dir`) to `out` (a directory gets a suite_report.html inside); return its path."""
    page = out_path(out, SUITE_REPORT_NAME)
    title = f"kernelsmith evolve-suite: {report.suite}"
    body = _body("kernelsmith evolve-suite", searches=True, summary="Summary: the best program of each task, afresh")
    searches = [asdict(t) for t in task_searches(report, Path(runs_dir), page)]
    return _write(report, page, title, body, {"runs_dir": str(runs_dir), "searches": searches})
