"""A suite report on the terminal: one row per task, then fast_p, AMSR and the geometric mean."""

from __future__ import annotations

from rich.table import Table

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.suite.bench import BenchReport, Summary


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def rows_table(report: BenchReport, note_chars: int | None = 60) -> Table:
    """`note_chars`: how much of an error's first line the note keeps (None: all of it)."""
    where = report.device + (f", {report.gpu_name}" if report.gpu_name and report.device == "cuda" else "")
    table = Table(title=f"{report.suite} ({where})")
    numeric = ("vs eager", "vs torch.compile", "ms", "eager ms", "of roofline")
    for col in ("task", "status", *numeric, "note"):
        table.add_column(col, justify="right" if col in numeric else "left")
    for r in report.rows:
        colour = "green" if r.success else ("yellow" if r.status == "correct" else "red")
        # Colour is lost in a log: a flagged correct row says in words that it is not a success.
        status = "correct, flagged" if r.correct and not r.success else r.status
        note = ", ".join(r.flags) if r.flags else (r.error or "").split("\n")[0][:note_chars]
        roof = "-" if r.roofline_fraction is None else f"{r.roofline_fraction:.0%}"
        table.add_row(
            r.task,
            f"[{colour}]{status}[/]",
            _x(r.speedup),
            _x(r.speedup_vs_compile),
            _ms(r.candidate_ms),
            _ms(r.reference_ms),
            roof,
            note,
        )
    return table


def summary_lines(s: Summary, label: str = "suite") -> list[str]:
    fast = "  ".join(f"fast_{p}={v:.2f}" for p, v in s.fast_p.items())
    lines = [
        f"{label}: {s.correct}/{s.tasks} correct ({s.correct_rate:.0%}); vs eager: {fast}  "
        f"AMSR={s.amsr:.3g}  geomean={_x(s.geomean_speedup)}"
    ]
    if s.fast_p_vs_compile:
        fast_c = "  ".join(f"fast_{p}={v:.2f}" for p, v in s.fast_p_vs_compile.items())
        amsr_c = "-" if s.amsr_vs_compile is None else f"{s.amsr_vs_compile:.3g}"
        lines.append(
            f"{' ' * len(label)}  vs torch.compile: {fast_c}  AMSR={amsr_c}  geomean={_x(s.geomean_speedup_vs_compile)}"
        )
    return lines


def report_lines(report: BenchReport) -> list[str]:
    lines = [f"speedups: {CPU_SPEEDUP_NOTE}"] if report.device == "cpu" else []
    lines += summary_lines(report.summary)
    for level, s in report.levels.items():
        lines += summary_lines(s, level)
    return [*lines, LEGEND]


# The summary's words, said once under it (docs/suite.md has the definitions and their sources).
LEGEND = (
    "fast_p: share of all tasks that are a success and faster than p x; AMSR: mean speedup over all tasks, "
    "a failure or a speedup below 1x counted as 0; geomean: over the successes only"
)
