"""What `optimize` says and keeps (issue 55), without a search: where the forward's time went in one measure
and in rows that add up; a headline prediction only where it can be compared; an infinite bound one way; the
advice for regions without a start once; a --seeds file no region takes said; the capture and the patch
each moved in place whole, naming where they are."""

from __future__ import annotations

import json
import os
import textwrap
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from test_report import browser, count, open_page  # noqa: F401  (browser: the fixture)

import kernelsmith.cli.optimize as cli
import kernelsmith.optimize.run as run
from kernelsmith.evolve.pace import combined, pace_of
from kernelsmith.optimize.breakdown import REST, time_rows
from kernelsmith.optimize.options import OptimizeOptions
from kernelsmith.optimize.page import write_page
from kernelsmith.optimize.result import Kernel, ModeTime, Optimized, PatchOutcome, RegionOutcome, Span
from kernelsmith.optimize.runs import RunInfo
from kernelsmith.optimize.starts import start_advice, unmatched
from kernelsmith.optimize.workdir import State, WorkDir

ADVICE = "no starting kernel for rope, cat: give --seeds"


def _regions() -> list[RegionOutcome]:
    """Capture's view (CPU time): a kernel measured in the check, one merged into it, one predicted, one
    without a start, a library op; 100 % - 62 % of the forward outside every region."""
    measured = Kernel(
        in_patch=True, modes=["eager"], taken={"eager": 2.0}, after_ms=Span(median=8.0, low=7.0, high=9.0)
    )
    merged = Kernel(in_patch=True, modes=["eager"], taken={"eager": 1.0}, served_by="norm")
    predicted = Kernel(in_patch=True, modes=["eager"], taken={"eager": 1.0})
    searched = dict(searched=True, start="--seeds s", allotment_s=20.0, elapsed_s=26.0, iterations=9)
    return [
        RegionOutcome(name="norm", rank=1, share=0.2, speedup=0.01, kernel=measured, **searched),
        RegionOutcome(name="final_norm", rank=2, share=0.1, speedup=0.02, kernel=merged, **searched),
        RegionOutcome(name="silu_mul", rank=3, share=0.1, speedup=0.05, kernel=predicted, **searched),
        RegionOutcome(name="rope", rank=4, share=0.1, searched=True, note="no starting kernel (--seeds s has none)"),
        RegionOutcome(name="linear", rank=5, share=0.12, note="a library op (mm): left to its library"),
    ]


def _patch(before: float = 4.0, after: float = 60.0) -> PatchOutcome:
    times = [
        ModeTime(
            mode="eager",
            measure="CPU time",
            before_ms=Span(median=before, low=3.5, high=4.5),
            after_ms=Span(median=after, low=50.0, high=70.0),
            speedup=before / after,
            within_noise=False,
        )
    ]
    inf = float("inf")
    prediction = dict(measure="CPU time", covered=0.4, speedup=0.03, low=0.02, high=inf, measured=before / after)
    prediction |= dict(measured_low=0.05, measured_high=0.09, agreement="cannot tell", agrees=False)
    return PatchOutcome(key="k", path="/w/p", passed=True, reason="passed", times=times, prediction=prediction)


def test_where_the_time_went_is_one_measure_and_the_rows_add_up():
    rows = time_rows(_regions(), _patch(), "CPU time")
    by = {r.label: r for r in rows}
    whole = by["the whole forward"]
    assert (whole.before, whole.after) == (4.0, 60.0)  # the check's forward, not capture's profile
    assert sum(r.before for r in rows[:-1]) == pytest.approx(4.0) and sum(r.after or 0 for r in rows[:-1]) == 60.0
    assert (by["norm"].before, by["norm"].after, by["norm"].how) == (pytest.approx(0.8), 8.0, "measured")
    assert (by["final_norm"].after, by["final_norm"].how) == (0.0, "in norm's kernel")
    assert by["silu_mul"].after == pytest.approx(0.4 / 0.05) and by["silu_mul"].how == "predicted"
    assert by["rope"].how == "unchanged" and by["library ops (1 regions)"].before == pytest.approx(0.48)
    rest = by[REST]  # the check's "outside the kernels" time, before missing from the rows
    assert rest.before == pytest.approx(4.0 * 0.38) and rest.after == pytest.approx(60.0 - (8.0 + 8.0 + 0.4 + 0.48))
    # no eager check in capture's measure: capture's shares, the whole not measured
    shares = time_rows(_regions(), None, "CPU time")
    assert sum(r.before for r in shares[:-1]) == pytest.approx(1.0) and shares[-1].after is None


def _optimized(tmp_path: Path) -> Optimized:
    regions = _regions()
    return Optimized(
        entry="m.py:make",
        device="cpu",
        out=str(tmp_path),
        measure="CPU time",
        budget_s=60.0,
        search_s=0.004,
        search_total_s=78.0,
        evaluations=combined(
            [pace_of([{"stages": {"correctness": 1.0, "timing": 3.0, "total": 4.0}}] * 26, 78.0)], 78.0
        ),
        capture_s=2.5,
        regions=regions,
        time_rows=time_rows(regions, _patch(), "CPU time"),
        patch=_patch(),
        start_advice=start_advice(["rope", "cat"], "cpu"),
        passed=True,
        reason="patch p: check passed",
    )


def test_the_advice_for_regions_without_a_start_is_said_once(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "console", Console(file=StringIO(), width=10_000))  # a pipe's: unbounded
    cli._say_outcome(_optimized(tmp_path))
    text = cli.console.file.getvalue()  # type: ignore[attr-defined]
    assert text.count("give --seeds") == 1 and ADVICE in text, text
    widest = max(len(line) for line in text.splitlines())
    assert widest < 220, widest  # 300-450 with the advice in every row
    assert "budget 1m, searched 1m18s over every run" in text and "9 iterations, 26s of 20s" in text, text
    assert "evaluations: 26 judged, 20 a minute of search time; their time: timing 75%, correctness 25%" in text, text
    assert start_advice(["rope"], "cuda").endswith("an LLM (--model with --llm-base-url)")  # no --device cuda


def test_the_page_says_it_one_way(browser, tmp_path):  # noqa: F811
    driver = open_page(browser, write_page(tmp_path / "report.html", _optimized(tmp_path)))
    card = driver.find_element("id", "card-forward").text
    assert "0.067" in card and "predicted" not in card  # "cannot tell": no headline figure
    prediction = driver.find_element("id", "prediction").text
    assert "(0.020\u00d7\u2013inf\u00d7)" in prediction and "cannot tell" in prediction, prediction
    budget = driver.find_element("id", "card-budget").text
    assert "1m" in budget and "searched 1m18s over every run (0.004s this run)" in budget, budget
    assert driver.find_element("id", "start-advice").text.startswith(ADVICE)
    assert count(driver, "#time-chart rect.after") == 7  # 3 searched, rope, the library op, the rest, the whole
    labels = [e.text for e in driver.find_elements("css selector", "#time-chart text.pvalue")]
    assert labels[-1] == "4 ms \u2192 60 ms (measured)", labels
    assert "9 iterations, 26s of 20s" in driver.find_element("css selector", "tr[data-region=norm] td.search").text


def test_a_seeds_file_no_region_takes_is_said(tmp_path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name in ("gelu.py", "norm_seed.py", "geluu.py", "linear.py"):
        (seeds / name).write_text("")
    regions = {"gelu": None, "norm": None, "linear": "a library op (mm): left to its library"}
    assert unmatched(str(seeds), regions) == (
        f"--seeds {seeds}: not used, no region searched takes them: geluu.py (no region is named so; gelu.py?); "
        "linear.py (linear: a library op (mm): left to its library)"
    )
    assert unmatched(str(seeds), {"gelu": None, "geluu": None, "norm": None, "linear": None}) is None
    assert unmatched("seeds.py:seed_for", regions) is None  # a function: every task is asked


def test_the_patch_is_made_aside_and_moved_in_whole(monkeypatch, tmp_path):
    """A kill during the check leaves the earlier patch as it was; a checked one replaces it whole, its
    apply.json naming where it is."""
    wd, state = WorkDir(tmp_path / "work"), State()
    final = wd.patch_dir("m.py:make")
    final.mkdir(parents=True)
    (final / "patch.json").write_text("earlier")
    region = run.Region("gelu", 1, 0.5, file="gelu.py")
    monkeypatch.setattr(run, "run_info", lambda d: RunInfo(exists=True))
    monkeypatch.setattr(run, "patch_key", lambda *a: "key")
    opts = OptimizeOptions(entry="m.py:make", out=wd.out, device="cpu")

    def killed(runs, capture, out, *args):
        assert out.name == final.name and out != final and (final / "patch.json").read_text() == "earlier"
        (out / "patch.json").parent.mkdir(parents=True)
        (out / "patch.json").write_text("unchecked")
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "make_patch", killed)
    with pytest.raises(KeyboardInterrupt):
        run._patch(wd, state, [region], opts, "cpu", lambda s: None)
    assert (final / "patch.json").read_text() == "earlier"

    def checked(runs, capture, out, *args):
        out.mkdir(parents=True)
        (out / "patch.json").write_text("checked")
        (out / "apply.json").write_text(json.dumps({"out_dir": str(out), "passed": True}))
        return PatchOutcome(key="key", path=str(out), passed=True, reason="passed")

    monkeypatch.setattr(run, "make_patch", checked)
    done = run._patch(wd, state, [region], opts, "cpu", lambda s: None)
    assert done is not None and done.path == str(final) and (final / "patch.json").read_text() == "checked"
    assert json.loads((final / "apply.json").read_text())["out_dir"] == str(final)
    assert not (wd.out / run.PATCH_PARTIAL).exists()


MODEL = """
import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)

    def forward(self, x):
        return torch.nn.functional.gelu(self.up(x)) * 2.0 + 1.0


def make():
    torch.manual_seed(0)
    return M(), (torch.randn(4, 16),)


def broken():
    return helper()


def helper():
    raise ValueError("no weights here")
"""


def test_the_capture_names_where_it_is_and_covers_at_most_the_forward(monkeypatch, tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent(MODEL))
    monkeypatch.chdir(tmp_path)
    wd = WorkDir(tmp_path / "work")
    run._captured(wd, State(), OptimizeOptions(entry="m.py:make", out=wd.out, device="cpu"), lambda s: None)
    manifest = json.loads((wd.capture / "capture.json").read_text())
    assert manifest["out_dir"] == str(wd.capture) and ".partial" not in json.dumps(manifest)
    assert 0 < manifest["covered_share"] <= 1.0 and manifest["forwards"] == 9  # more forwards by default


def test_fused_regions_are_captured_and_planned_only_with_fused(monkeypatch, tmp_path):
    """Issue 57: without --fused the capture is as before (no fused task, the work directory bound as before);
    with it, the regions across the library boundary are tasks ranked with the others, and plan searches them."""
    from kernelsmith.optimize.plan import plan

    (tmp_path / "m.py").write_text(textwrap.dedent(MODEL))
    monkeypatch.chdir(tmp_path)
    kinds = {}
    for fused in (False, True):
        opts = OptimizeOptions(entry="m.py:make", out=tmp_path / f"w{fused}", device="cpu", fused=fused, forwards=1)
        wd = WorkDir(opts.out)
        run._captured(wd, State(), opts, lambda s: None)
        manifest = json.loads((wd.capture / "capture.json").read_text())
        kinds[fused] = {t["fused"] for t in manifest["tasks"]}
        searched = {r.name for r in plan(manifest, top=10) if r.searched}
        assert searched >= {t["name"] for t in manifest["tasks"] if t["fused"] and t["file"]}
        assert ("fused" in opts.bound()) == fused
    assert kinds[False] == {""} and "epilogue" in kinds[True]


def test_a_factorys_error_names_its_file_and_line(monkeypatch, tmp_path):
    from kernelsmith.capture.entry import call_entry
    from kernelsmith.errors import UserError

    (tmp_path / "m.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "bad.py").write_text("import torch\n\nx = 1\ny = undefined_name\n")
    monkeypatch.chdir(tmp_path)
    line = textwrap.dedent(MODEL).splitlines().index('    raise ValueError("no weights here")') + 1
    with pytest.raises(UserError) as raised:
        call_entry("m.py:broken", "cpu")
    assert str(raised.value) == f"ENTRY m.py:broken: the factory raised ValueError at m.py:{line}: no weights here"
    with pytest.raises(UserError, match=r"importing bad\.py raised NameError at bad\.py:4: name 'undefined_name'"):
        call_entry("bad.py:make", "cpu")
    (tmp_path / "syntax.py").write_text("def make(:\n")
    with pytest.raises(UserError, match=r"raised SyntaxError at syntax\.py:1"):
        call_entry("syntax.py:make", "cpu")
    assert os.getcwd() == str(tmp_path)
