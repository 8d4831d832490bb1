"""Self-contained HTML reports: of a search run directory, of a suite benchmark, and of an
evolve-suite (the benchmark plus each task's search)."""

from kernelsmith.report.run_report import write_run_report
from kernelsmith.report.suite_report import write_evolve_suite_report, write_suite_report

__all__ = ["write_evolve_suite_report", "write_run_report", "write_suite_report"]
