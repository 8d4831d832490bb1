"""The page of a run of `kernelsmith optimize`: one self-contained HTML file in the work directory (the
reports' own page, kernelsmith/report/page.py, with optimize.js drawing it from the data blob): the
outcome, where the forward's time went before and after, the model's time in each mode with its spread,
the fraction of its speed of light (capture's floor) and the verdicts' prediction beside it, each mode as the
patch serves it (its kernels, or the model as it was and why), and every region with its fraction of its
speed of light, its search, its kernel and its part in the patch (linked to its run's report)."""

from __future__ import annotations

import json
from pathlib import Path

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.optimize.budget import shown_time
from kernelsmith.optimize.outcome import search_said
from kernelsmith.optimize.result import Optimized
from kernelsmith.report.page import render_page, write_atomic

# Trusted markup only: optimize.js fills every part from the data blob, user text as text nodes.
_BODY = """<header><h1 id="title">kernelsmith optimize</h1><p id="subtitle"></p></header>
<main>
<section id="outcome"><h2>Outcome</h2><div class="cards" id="headline"></div>
<p id="verdict"></p><p id="too-small" class="note"></p></section>
<section><h2>Where the forward's time went, before and after</h2>
<p class="note" id="time-note">One measure, the check's eager forward in capture's measure: before, the original
forward's time split by capture's shares; after, the patched forward as the check measured it: a region at its
kernel's time where a kernel took it (else its verdict's prediction, its time before over the kernel's speedup,
else unchanged), and the rest of the forward (outside the regions: Python, launches, the patch's dispatch) the
whole less the rows, so that the rows add up to the whole. Bars: shares of the original forward. Without such a
check, capture's shares and the verdicts' predictions.</p>
<svg id="time-chart" class="profile" role="img" aria-label="the forward's time before and after"></svg></section>
<section><h2>The model's time, before and after, in each mode</h2>
<p id="speed-of-light" class="note"></p>
<div class="table-scroll"><table id="mode-table" class="data compact"><thead></thead><tbody></tbody></table></div>
<p id="served"></p><p id="prediction"></p><p id="capture-times" class="note"></p></section>
<section><h2>Regions</h2>
<p class="note">Every region of the captured forward, heaviest first: the fraction of its speed of light capture's
time reached (its floor over its time: the headroom) and, after, its kernel's time in the patched eager forward;
searched (the heaviest outside library ops) or why not; each search's start, time and best kernel (its verdict
speedup over its task's reference); and its part in the patch: the regions it took per forward in each mode, or why
it is not there.</p>
<div class="table-scroll"><table id="region-table" class="data"><thead></thead><tbody></tbody></table></div>
<p id="start-advice" class="note"></p>
</section>
</main>"""


def write_page(path: Path, result: Optimized) -> Path:
    """Write the page of `result` to `path` (OUT/report.html) and return it."""
    # as optimize.json holds it: an infinite bound is "Infinity" (model_dump keeps a float the page would drop)
    data = json.loads(result.model_dump_json())
    data["speedup_note"] = CPU_SPEEDUP_NOTE if result.device == "cpu" else None
    data["patch_name"] = Path(result.patch.path).name if result.patch is not None and result.patch.path else None
    # Times as the terminal says them (one text for one number)
    data["said"] = {
        "budget": shown_time(result.budget_s),
        "searched": shown_time(result.search_total_s),
        "this_run": shown_time(result.search_s),
        "capture": shown_time(result.capture_s) if result.capture_s is not None else None,
        "search": {r.name: search_said(r, stop=True) for r in result.regions if r.searched},
    }
    title = f"kernelsmith optimize: {result.entry}"
    page = render_page(title, _BODY, data, scripts=["common.js", "optimize.js"], styles=["report.css"])
    return write_atomic(Path(path), page)
