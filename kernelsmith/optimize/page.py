"""The page of a run of `kernelsmith optimize`: one self-contained HTML file in the work directory (the
reports' own page, kernelsmith/report/page.py, with optimize.js drawing it from the data blob): the
outcome, where the forward's time went before and after, the model's time in each mode with its spread
and the verdicts' prediction beside it, each mode as the patch serves it (its kernels, or the model as it
was and why), and every region with its search, its kernel and its part in
the patch (linked to its run's report)."""

from __future__ import annotations

from pathlib import Path

from kernelsmith.device import CPU_SPEEDUP_NOTE
from kernelsmith.optimize.result import Optimized
from kernelsmith.report.page import render_page, write_atomic

# Trusted markup only: optimize.js fills every part from the data blob, user text as text nodes.
_BODY = """<header><h1 id="title">kernelsmith optimize</h1><p id="subtitle"></p></header>
<main>
<section id="outcome"><h2>Outcome</h2><div class="cards" id="headline"></div>
<p id="verdict"></p><p id="too-small" class="note"></p></section>
<section><h2>Where the forward's time went, before and after</h2>
<p class="note" id="time-note">Each row's share of the original forward, in capture's measure: before as capture
profiled it; after as the patched forward measured it where a kernel took the region (its regions' time in the
patched eager forward), else as its kernel's verdict predicts (share / speedup), else unchanged.</p>
<svg id="time-chart" class="profile" role="img" aria-label="the forward's time before and after"></svg></section>
<section><h2>The model's time, before and after, in each mode</h2>
<div class="table-scroll"><table id="mode-table" class="data compact"><thead></thead><tbody></tbody></table></div>
<p id="served"></p><p id="prediction"></p><p id="capture-times" class="note"></p></section>
<section><h2>Regions</h2>
<p class="note">Every region of the captured forward, heaviest first: searched (the heaviest outside library ops)
or why not; each search's start, time and best kernel (its verdict speedup over its task's reference); and its part
in the patch: the regions it took per forward in each mode, or why it is not there.</p>
<div class="table-scroll"><table id="region-table" class="data"><thead></thead><tbody></tbody></table></div>
</section>
</main>"""


def write_page(path: Path, result: Optimized) -> Path:
    """Write the page of `result` to `path` (OUT/report.html) and return it."""
    data = result.model_dump(mode="json")
    data["speedup_note"] = CPU_SPEEDUP_NOTE if result.device == "cpu" else None
    data["patch_name"] = Path(result.patch.path).name if result.patch is not None and result.patch.path else None
    title = f"kernelsmith optimize: {result.entry}"
    page = render_page(title, _BODY, data, scripts=["common.js", "optimize.js"], styles=["report.css"])
    return write_atomic(Path(path), page)
