"""`write_run_report`: one self-contained HTML page about a search run directory.

The page shows the task and budget, the best speedups, the status counts, tokens and cost, the
best speedup so far over the iterations, the lineage tree, each island's MAP-Elites grid, the
best kernel with its diffs, where its device time goes (and its parent's), and every program in a
sortable table. It reads the run directory
only; the page needs no network to open.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from kernelsmith.report.page import out_path, render_page, write_atomic
from kernelsmith.report.run_data import load_run

REPORT_NAME = "report.html"

# The page's skeleton: trusted markup only; report.js fills every part from the data blob.
_BODY = """<header><h1 id="title">kernelsmith run</h1><p id="subtitle"></p></header>
<main>
<section id="overview"><h2>Overview</h2><div class="cards">
<div><h3>Best</h3><div id="best"></div></div>
<div><h3>Programs by status</h3><div id="status-counts"></div></div>
<div><h3>Tokens and cost</h3><div id="usage"></div></div>
<div><h3>Budget</h3><div id="budget"></div></div>
</div></section>
<section><h2>Task</h2><div id="task"></div></section>
<section><h2>Best speedup so far</h2>
<p class="note" id="chart-rule">Line: the run's best up to each iteration: its first correct, unflagged program,
replaced only by a later one faster beyond both programs' timing noise (new &gt; best &times; (1 + noise of new + noise
of best)), so a point above the line can be within noise of it. Points: every correct program.
<span id="chart-noise"></span></p>
<svg id="chart-best" role="img" aria-label="best speedup so far"></svg></section>
<section><h2>Lineage</h2><div id="legend" class="legend"></div>
<div class="lineage-wrap"><div class="scroll"><svg id="lineage" role="img" aria-label="lineage tree"></svg></div>
<aside id="detail" class="detail"><p class="note">Click a program to see its details.</p></aside></div></section>
<section><h2>Archive</h2><div id="archive-grid"></div></section>
<section><h2>Best kernel</h2><div id="best-code"></div></section>
<section><h2>Where the time goes</h2>
<p class="note">Device time per forward call of each kernel, from the CUDA profiler (untimed calls after timing): the
best program and its parent, on one scale. Own kernels and library kernels (kept by a partial replacement) are
told apart.</p>
<div id="profiles"></div></section>
<section><h2>Programs</h2><div class="table-scroll">
<table id="programs" class="data"><thead></thead><tbody></tbody></table></div></section>
</main>"""


def write_run_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write the report of `run_dir` to `out` (default `run_dir/report.html`; a directory gets a
    report.html inside) and return its path."""
    run_dir = Path(run_dir)
    data = load_run(run_dir)
    title = f"kernelsmith run: {data.task_name or run_dir.name}"
    page = render_page(title, _BODY, asdict(data), scripts=["common.js", "report.js"], styles=["report.css"])
    return write_atomic(out_path(out if out is not None else run_dir, REPORT_NAME), page)
