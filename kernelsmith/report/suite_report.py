"""`write_suite_report`: one self-contained HTML page of a `kernelsmith bench` result: the
summary metrics (overall and per level), a bar per task and the per-task table."""

from __future__ import annotations

from pathlib import Path

from kernelsmith.report.page import out_path, render_page, write_atomic
from kernelsmith.suite.bench import BenchReport

SUITE_REPORT_NAME = "suite_report.html"

# Trusted markup only; suite.js fills it from the data blob.
_BODY = """<header><h1 id="title">kernelsmith bench</h1><p id="subtitle"></p></header>
<main>
<section><h2>Summary</h2><div class="cards" id="headline"></div>
<h3>fast_p: the share of all tasks that are correct and faster than p times the baseline</h3><div id="fastp"></div>
<h3>Per level</h3><div id="levels"></div></section>
<section><h2>Speedup per task</h2>
<p class="note">Bars start at 1&times; (as fast as eager PyTorch);
failed tasks are marked &#x2716; with their status.</p>
<div class="scroll"><svg id="suite-chart" role="img" aria-label="speedup per task"></svg></div></section>
<section><h2>Tasks</h2><div class="table-scroll">
<table id="suite-table" class="data"><thead></thead><tbody></tbody></table></div><div id="skipped"></div></section>
</main>"""


def write_suite_report(report: BenchReport, out: Path) -> Path:
    """Write the HTML report of a suite benchmark to `out` (a directory gets a suite_report.html
    inside) and return its path."""
    page = render_page(
        f"kernelsmith bench: {report.suite}",
        _BODY,
        report.model_dump(mode="json"),
        scripts=["common.js", "suite.js"],
        styles=["report.css"],
    )
    return write_atomic(out_path(out, SUITE_REPORT_NAME), page)
