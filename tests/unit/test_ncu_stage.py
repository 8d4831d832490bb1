"""The counters stage (kernelsmith/evaluate/profiling/ncu_stage.py) against a stand-in `ncu` that replays
output recorded on the H200, or fails the ways ncu does: the report says what happened, within
the stage's time limit, and the command never touches the GPU's clocks."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import pytest

from kernelsmith.evaluate.counters import CountersReport, KernelCounters, merge_launches
from kernelsmith.evaluate.profiling import ncu_stage

RECORDED = Path(__file__).parents[1] / "cases/profiles/ncu_h200_2026-12-03.csv"
TASK = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
CAND = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
FAKE = """#!{python}
import os, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler")
    print("Version 2025.3.1.0 (stand-in)")
    sys.exit(0)
open(os.path.join(os.getcwd(), "argv.txt"), "w").write("\\n".join(args))
mode = {mode!r}
if mode == "ok":
    sys.stdout.write(open({recorded!r}).read())
elif mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
elif mode == "sleep":
    time.sleep(60)
elif mode == "crash":
    print("Traceback (most recent call last):")
    print("RuntimeError: CUDA error: an illegal memory access was encountered")
    print("==ERROR== The application returned an error code (1).")  # what ncu adds (H200, 2025.3.1)
    sys.exit(1)
elif mode == "none":
    print("==PROF== Disconnected")
"""


def fake_ncu(tmp_path: Path, monkeypatch, mode: str) -> Path:
    path = tmp_path / f"ncu-{mode}"
    path.write_text(FAKE.format(python=sys.executable, mode=mode, recorded=str(RECORDED)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KERNELSMITH_NCU", str(path))
    ncu_stage.ncu_version.cache_clear()
    return path


def test_recorded_output_becomes_a_report_of_the_heaviest_kernels(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, "ok")
    rep = ncu_stage.profile(TASK, CAND, timeout=60)
    assert rep.status == "ok" and rep.launches == 2, rep
    (k,) = rep.kernels  # two launches of one kernel, merged
    assert "distribution_elementwise_grid_stride_kernel" in k.name and k.launches == 2
    assert k.total_ns is not None and k.duration_ns is not None and k.total_ns > k.duration_ns
    assert "network" in rep.contained and rep.seconds > 0
    assert rep.tool is not None and rep.tool.endswith("(Version 2025.3.1.0 (stand-in))")
    assert rep.summary().endswith("compute-bound: SM at 69% of peak (DRAM 40%)")


@pytest.mark.parametrize(
    "mode, status, words",
    [
        ("perm", "not_permitted", "ERR_NVGPUCTRPERM"),
        ("crash", "failed", "an illegal memory access"),
        ("none", "failed", "ncu profiled no kernel"),
    ],
)
def test_failures_say_why(tmp_path, monkeypatch, mode, status, words):
    fake_ncu(tmp_path, monkeypatch, mode)
    rep = ncu_stage.profile(TASK, CAND, timeout=60)
    assert rep.status == status and words in (rep.message or ""), rep
    assert rep.kernels == []


def test_the_stage_keeps_its_time_limit(tmp_path, monkeypatch):
    fake_ncu(tmp_path, monkeypatch, "sleep")
    t0 = time.monotonic()
    rep = ncu_stage.profile(TASK, CAND, timeout=1.5)
    assert rep.status == "timeout" and "1.5 s" in (rep.message or "")
    assert time.monotonic() - t0 < 20


def test_missing_ncu_is_reported(monkeypatch):
    monkeypatch.setenv("KERNELSMITH_NCU", "/nonexistent/ncu")
    rep = ncu_stage.profile(TASK, CAND)
    assert rep.status == "missing" and "not installed" in (rep.message or "")
    assert rep.summary().startswith("no counters (missing)")


def test_the_command_leaves_clocks_alone_and_profiles_one_window(tmp_path):
    cmd = ncu_stage.command("/opt/ncu", tmp_path, netns=False)
    joined = " ".join(cmd)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--cache-control all" in joined and cmd[-3:] == [
        "-m",
        "kernelsmith.evaluate.profiling.ncu_target",
        str(tmp_path),
    ]
    wrapped = ncu_stage.command("/opt/ncu", tmp_path, netns=True)
    assert wrapped[1:4] == ["-m", "kernelsmith.evaluate.profiling.ncu_stage", str(tmp_path)] and wrapped[4:] == cmd


def test_launches_merge_per_kernel_heaviest_first():
    launches = [
        KernelCounters(name="a", duration_ns=10, sm_pct=1),
        KernelCounters(name="b", duration_ns=15, sm_pct=2),
        KernelCounters(name="a", duration_ns=12, sm_pct=3),
    ]
    merged = merge_launches(launches, keep=5)
    assert [(k.name, k.launches, k.total_ns, k.sm_pct) for k in merged] == [("a", 2, 22, 3), ("b", 1, 15, 2)]
    assert len(merge_launches(launches, keep=1)) == 1
    assert CountersReport(status="ok").summary() == "no kernel ran in the profiled call"
