"""Self-contained HTML reports: of a search run directory, and of a suite benchmark."""

from kernelsmith.report.run_report import write_run_report
from kernelsmith.report.suite_report import write_suite_report

__all__ = ["write_run_report", "write_suite_report"]
