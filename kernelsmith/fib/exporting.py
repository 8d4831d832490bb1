"""`kernelsmith export-fib`: tasks and search runs in flashinfer-bench's format (docs/ecosystem.md).

Each SOURCE is a task file or a run directory. A task becomes a Definition and its Workloads
(definition_out.py; one `kernelsmith import-fib` wrote comes back as it came, imported_out.py). A run
gives its best kernel as a Solution and that kernel's verdict as a Trace (solution_out.py); its
Definition is the one of a task file given beside it whose source (as written, or cut to its
CPU_SIZES) is the run's task, else its own stored task's. A task that cannot be a Definition is left out
whole (with its runs), and the line says which value and why; a broken one (unreadable, not a task, its
code raises) is failed, one line each, and the rest exported; when nothing is left, nothing is written.
What is written is then loaded with flashinfer-bench's own TraceSet: a set it cannot load is a bug here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from flashinfer_bench.data import Trace, TraceSet

from kernelsmith.errors import TaskError, UserError
from kernelsmith.evolve.store import RunStore, holds_run
from kernelsmith.fib import layout
from kernelsmith.fib.definition_out import export_task
from kernelsmith.fib.dtypes import TaskFails, Unmappable
from kernelsmith.fib.exported import Exported, is_imported
from kernelsmith.fib.imported_out import export_imported
from kernelsmith.fib.solution_out import FromRun, from_run
from kernelsmith.fib.trace_out import serving_tolerance
from kernelsmith.fib.writer import Staged, line_key, write
from kernelsmith.task import Task, read_source


@dataclass
class Source:
    path: Path
    name: str
    source: str  # the task's text (a run's: its stored task)
    run: Path | None = None  # a run directory
    exported: Exported | None = None
    why: str | None = None  # why it is left out
    failed: bool = False  # left out because it is broken (unreadable, not a task, its code raises)


@dataclass
class ExportReport:
    out: str
    definitions: list[dict] = field(default_factory=list)  # name, op_type, axes, workloads, file
    # name, definition, run, program, trace status, note, apply (the ApplyConfig tolerances that serve it)
    solutions: list[dict] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, why): what flashinfer-bench cannot say
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source, why): broken tasks and runs
    written: list[str] = field(default_factory=list)


def _same(a: str, b: str) -> bool:
    norm = lambda s: s.lstrip("\ufeff").replace("\r\n", "\n").strip()
    return norm(a) == norm(b)


def _read(paths: list[Path]) -> tuple[list[Source], list[Source]]:
    """The task files and runs among `paths`; one that cannot be read, or is no task, comes back failed."""
    tasks, runs, names = [], [], set()
    for p in paths:
        if p.is_dir():
            if not holds_run(p):
                tasks.append(Source(p, p.name, "", why="neither a task file nor a run directory", failed=True))
                continue
            store = RunStore.open_readonly(p)
            try:
                text, name = store.get_meta("task_source") or "", store.get_meta("task_name") or p.name
            finally:
                store.close()
            runs.append(Source(p, name, text, run=p))
        else:
            stem = re.sub(r"\W", "_", p.stem)
            name, n = stem, 1
            while name in names:
                n += 1
                name = f"{stem}_{n}"
            names.add(name)
            try:
                text = Task.from_source(read_source(p, "task", TaskError), name, str(p)).source
            except TaskError as exc:  # the line names the file already
                why = str(exc).removeprefix(f"{p} is ")
                tasks.append(Source(p, name, "", why=why, failed=True))
                continue
            tasks.append(Source(p, name, text))
    return tasks, runs


def _export(src: Source, op_type: str | None, small: bool) -> None:
    if src.failed:
        return
    try:
        src.exported = (
            export_imported(src.source, None if src.run else src.path.parent)
            if is_imported(src.source)
            else export_task(src.name, src.source, op_type, small)
        )
    except Unmappable as exc:
        src.why = str(exc)
    except TaskFails as exc:
        src.why, src.failed = str(exc), True


def _pair(run: Source, tasks: list[Source], op_type: str | None, small: bool) -> tuple[Source, int]:
    """The task a run was on (a given file, or its stored task) and the index of its workload there."""
    for t in tasks:
        if t.exported is not None:
            for k, s in enumerate(t.exported.sources):
                if _same(s, run.source):
                    return t, k
    taken = {t.name for t in tasks}
    base = re.sub(r"\W", "_", run.name)
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    own = Source(run.path, name, run.source, run=run.path)
    _export(own, op_type, small)
    if own.exported is None:
        return own, 0
    found = [k for k, s in enumerate(own.exported.sources) if _same(s, run.source)]
    if not found:  # its stored task is a shrunk one, and export_task exported the sizes it would shrink to
        raise UserError(f"{run.path}: its task's sizes are not among the workloads exported; give the task file")
    tasks.append(own)
    return own, found[0]


def _best(run: Path):
    store = RunStore.open_readonly(run)
    try:
        return store.best()
    finally:
        store.close()


def _stage(tasks: list[Source], made: list[FromRun], report: ExportReport) -> Staged:
    staged = Staged()
    for t in tasks:
        if t.exported is None:
            continue
        d = t.exported.definition
        staged.json[layout.definition_path(d.op_type, d.name)] = d
        for w in t.exported.workloads:
            line = Trace(definition=d.name, workload=w).model_dump_json()
            staged.add_line(layout.workloads_path(d.op_type, d.name), line_key(line), line)
        staged.blobs.update(t.exported.blobs)
        axes = {a: ("var" if x.type == "var" else x.value) for a, x in d.axes.items()}
        report.definitions.append(
            dict(name=d.name, op_type=d.op_type, axes=axes, workloads=len(t.exported.workloads), source=str(t.path))
        )
    for m in made:
        s, d_name = m.solution, m.solution.definition
        op_type = next(
            t.exported.definition.op_type for t in tasks if t.exported and t.exported.definition.name == d_name
        )
        staged.json[layout.solution_path(s.author, op_type, d_name, s.name)] = s
        status = serves = None
        if m.trace is not None and m.trace.evaluation is not None:
            line = m.trace.model_dump_json()
            staged.add_line(layout.traces_path(s.author, op_type, d_name), line_key(line), line)
            status, serves = m.trace.evaluation.status.value, serving_tolerance(m.trace.evaluation)
        report.solutions.append(
            dict(
                name=s.name,
                definition=d_name,
                run=m.run_dir,
                program=m.program,
                trace=status,
                note=m.note,
                apply=dict(max_atol=serves[0], max_rtol=serves[1]) if serves else None,
            )
        )
    return staged


def _check_names(out: Path, staged: Staged) -> None:
    """A Definition or Solution named as one the dataset at `out` holds must be that one (flashinfer-bench
    loads a dataset by names, wherever the files lie)."""
    if not (out / "definitions").is_dir():
        return
    have = layout.Dataset.read(out)
    solutions = {s.name: s for group in have.solutions.values() for s in group}
    for rel, model in staged.json.items():
        name = getattr(model, "name", "")
        old = have.definitions.get(name) if rel.startswith("definitions/") else solutions.get(name)
        if old is not None and old.model_dump(mode="json") != model.model_dump(mode="json"):
            raise UserError(f"{out} holds another {type(model).__name__} named {name}: nothing written")


def export_fib(
    sources: list[Path],
    out: Path,
    author: str = "kernelsmith",
    op_type: str | None = None,
    small: bool = False,
    dps: bool = False,
) -> ExportReport:
    """Export task files and run directories into `out` (new, empty, or a flashinfer-bench dataset)."""
    tasks, runs = _read(sources)
    report = ExportReport(str(out))
    for t in tasks:
        _export(t, op_type, small)
    made: list[FromRun] = []
    for r in runs:
        task, k = _pair(r, tasks, op_type, small)
        best = _best(r.run)  # type: ignore[arg-type]
        if task.exported is None:
            (report.failed if task.failed else report.skipped).append(
                (str(r.path), task.why or "its task cannot be a Definition")
            )
        elif best is None or not best.code:
            report.skipped.append((str(r.path), "no successful program in the run"))
        else:
            made.append(from_run(task.exported, k, best, r.path, author, dps))
    report.skipped += [(str(t.path), t.why) for t in tasks if t.why is not None and not t.failed]
    report.failed += [(str(t.path), t.why or "") for t in tasks if t.failed]
    if not any(t.exported for t in tasks):
        said = [f"{source}: {why}" for source, why in report.failed] + [why for _, why in report.skipped]
        raise UserError("nothing to export: " + "; ".join(said))
    staged = _stage(tasks, made, report)
    _check_names(out, staged)
    report.written = write(out, staged)
    TraceSet.from_path(str(out))  # flashinfer-bench's own loader: it validates every file it reads
    return report
