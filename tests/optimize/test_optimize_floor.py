"""The speed of light in `optimize` (issue 57), without a search: each region's fraction of its floor from the
capture, after the patch where its kernel's time was measured, and the forward's in each mode, said in the live
board, the table and the page alike; a capture without a card (the CPU) or made before it was kept shows none."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from test_report import browser, open_page  # noqa: F401  (browser: the fixture)

import kernelsmith.cli.optimize as cli
from kernelsmith.optimize.board import Board, Row
from kernelsmith.optimize.outcome import region_outcome, speed_of_light
from kernelsmith.optimize.page import write_page
from kernelsmith.optimize.plan import plan
from kernelsmith.optimize.result import Kernel, ModeTime, Optimized, PatchOutcome, Span
from kernelsmith.optimize.runs import RunInfo
from kernelsmith.optimize.workdir import RegionState, WorkDir

# capture.json as a CUDA capture writes it: the forward's floor 0.64 ms, its profiled time 1.0 ms
LIGHT = dict(bytes=1_920_000_000, flops=10**9, floor_ms=0.64, of_floor=0.64, card="NVIDIA H100 80GB HBM3")
LIGHT |= dict(bandwidth=3.0e12, peak_flops=7.0e14, datasheet="H100 SXM", datasheet_bandwidth=3.35e12)
LIGHT |= dict(datasheet_flops=989e12)
TASKS = [
    dict(name="norm", rank=1, share=0.3, calls=2, file="norm.py", floor_ms=0.012, of_floor=0.12),
    dict(name="linear", rank=2, share=0.5, calls=4, file="linear.py", library=True, ops=["mm.default"]),
]


def _span(ms: float) -> Span:
    return Span(median=ms, low=ms * 0.9, high=ms * 1.1)


def _patch() -> PatchOutcome:
    kernel = Kernel(in_patch=True, modes=["eager"], taken={"eager": 2.0}, after_ms=_span(0.04))
    times = [
        ModeTime(mode=m, measure=x, before_ms=_span(b), after_ms=_span(a), speedup=b / a, within_noise=False)
        for m, x, b, a in (("eager", "device time", 1.0, 0.9), ("graphs", "graph replay wall time", 0.9, 0.8))
    ]
    return PatchOutcome(key="k", path="/w/p", passed=True, reason="passed", kernels={"norm": kernel}, times=times)


def _optimized(tmp_path: Path) -> Optimized:
    manifest = {"entry": "m.py:make", "device": "cuda", "tasks": TASKS, "speed_of_light": LIGHT}
    patch = _patch()
    regions = plan(manifest, top=3)
    wd = WorkDir(tmp_path)
    outcomes = [region_outcome(r, RegionState(), RunInfo(), wd, patch, "cuda") for r in regions]
    return Optimized(
        entry="m.py:make",
        device="cuda",
        out=str(tmp_path),
        measure="device time",
        budget_s=60.0,
        regions=outcomes,
        patch=patch,
        speed_of_light=speed_of_light(manifest, patch),
        passed=True,
        reason="patch p: check passed",
    )


def test_each_regions_and_each_modes_fraction_before_and_after(tmp_path):
    done = _optimized(tmp_path)
    norm, linear = done.regions
    assert (norm.floor_ms, norm.of_floor) == (0.012, 0.12)
    assert norm.of_floor_after == pytest.approx(0.012 / 0.04)  # its kernel's time in the patched eager forward
    assert linear.of_floor is None and linear.of_floor_after is None  # no figure: nothing made up
    eager, graphs = done.patch.times  # type: ignore[union-attr]
    assert (eager.of_floor_before, eager.of_floor_after) == (pytest.approx(0.64), pytest.approx(0.64 / 0.9))
    assert graphs.of_floor_after == pytest.approx(0.8)  # 0.80 ms against a 0.64 ms floor: 80% of it
    assert done.speed_of_light is not None and "0.64 ms on NVIDIA H100 80GB HBM3" in done.speed_of_light.said
    assert "datasheet (H100 SXM): 3.35 TB/s, 989 TFLOP/s" in done.speed_of_light.said
    # a capture made before the speed of light was kept, or a region not searched: none, and no failure
    assert speed_of_light({"tasks": []}, _patch()) is None


def test_the_board_shows_each_regions_headroom_before_its_search():
    rows = [Row.of("norm", 9.0, RunInfo(), ready=True, of_floor=0.12), Row.of("rope", 9.0, RunInfo(), ready=True)]
    lines = Board(rows, 1, lambda text: None, None).lines()
    assert lines[0].endswith("0 iterations  captured at 12% of its speed of light"), lines
    assert lines[1].endswith("0 iterations"), lines


def test_the_table_says_the_fractions_and_the_floor(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "console", Console(file=StringIO(), width=400))
    cli._say_outcome(_optimized(tmp_path))
    text = cli.console.file.getvalue()  # type: ignore[attr-defined]
    assert "of SoL" in text and "12% -> 30%" in text, text
    assert "speed of light: the forward moves at least 1.92 GB and does 1 GFLOP: 0.64 ms on NVIDIA H100" in text
    graphs = next(line for line in text.splitlines() if line.startswith("graphs:"))
    assert graphs.endswith("; 71% -> 80% of its speed of light"), graphs


def test_the_page_says_them_as_the_table_does(browser, tmp_path):  # noqa: F811
    driver = open_page(browser, write_page(tmp_path / "report.html", _optimized(tmp_path)))
    norm = driver.find_element("css selector", "tr[data-region=norm] td.of-floor").text
    assert norm == "12% \u2192 30%", norm
    assert driver.find_element("css selector", "tr[data-region=linear] td.of-floor").text == "\u2014"
    graphs = driver.find_element("css selector", "tr[data-mode=graphs] td.of-floor").text
    assert graphs == "71% \u2192 80%", graphs
    assert "0.64 ms on NVIDIA H100 80GB HBM3" in driver.find_element("id", "speed-of-light").text
