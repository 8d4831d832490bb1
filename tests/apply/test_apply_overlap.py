"""Two kernels whose regions overlap (issue 55): a channels-last UNet ResBlock pair, where the residual add
of one block feeds the next block's GroupNorm + SiLU. Its capture has a GroupNorm + SiLU task (three calls)
and an add + GroupNorm + SiLU task (one), whose region holds the smaller one's ops. The larger region's
kernel takes them, whatever the order of the patch's kernels, in eager and compiled modes alike; the
smaller takes its own three and is said as served by the larger where it lay inside it. The kernels are
their tasks' own Model (outputs compare exactly)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from test_apply import _run

from kernelsmith.apply.e2e import E2E, check
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.apply.run import Applied, apply_runs
from kernelsmith.apply.serving import broken, took
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.optimize.patching import outcome
from kernelsmith.patch.install import install

UNET = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResBlock(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(4, c), nn.Conv2d(c, c, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(4, c), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return x + h


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(ResBlock(), ResBlock())

    def forward(self, x):
        return self.blocks(x)


def make():
    torch.manual_seed(0)
    model = Pair().to(memory_format=torch.channels_last)
    return model, (torch.randn(2, 16, 8, 8).to(memory_format=torch.channels_last),)
"""


@pytest.fixture(autouse=True)
def _removed(monkeypatch):
    """Every patch the check installs is removed by it; Inductor's caches are off, so that each compile
    runs the patch's graph pass."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield


@pytest.fixture(scope="module")
def unet(tmp_path_factory) -> tuple[str, Path, dict[str, dict]]:
    """(ENTRY, the capture, {"small": GroupNorm + SiLU's task, "large": add + GroupNorm + SiLU's})."""
    root = tmp_path_factory.mktemp("unet")
    (root / "unet_model.py").write_text(textwrap.dedent(UNET))
    entry = f"{root / 'unet_model.py'}:make"
    capture(entry, root / "cap", forwards=1)
    tasks = json.loads((root / "cap/capture.json").read_text())["tasks"]
    silu = [t for t in tasks if t["file"] and not t["fused"] and "silu.default" in t["ops"]]
    small = next(t for t in silu if "add.Tensor" not in t["ops"])
    large = next(t for t in silu if "add.Tensor" in t["ops"])
    assert (small["calls"], large["calls"]) == (3, 1)
    return entry, root / "cap", {"small": small, "large": large}


@pytest.mark.parametrize("order", [("small", "large"), ("large", "small")])
def test_the_kernel_of_the_larger_region_takes_it_in_eager_and_compile_mode_in_either_order(unet, tmp_path, order):
    """Issue 55: with the smaller kernel first in the patch's list, it took the ops of the larger region, and
    the larger kernel was dropped for "never took its regions in eager mode"."""
    entry, cap, tasks = unet
    manifest = json.loads((cap / "capture.json").read_text())
    kept = []
    for key in order:
        task = tasks[key]
        chosen = Chosen("runs/x", task["name"], task["share"], task["calls"], 2.0, 1)
        kept.append((chosen, (cap / task["file"]).read_text() + "\n\nModelNew = Model\n", task))
    write_patch(tmp_path / "unet_patch", cap, manifest, kept)
    listed = [k["name"] for k in json.loads((tmp_path / "unet_patch/patch.json").read_text())["kernels"]]
    assert listed == [tasks[k]["name"] for k in order]
    small, large = tasks["small"]["name"], tasks["large"]["name"]
    made = call_entry(entry, "cpu")
    for mode in ("eager", "compile"):
        patch = install(made.model, tmp_path / "unet_patch", "cpu")
        try:
            e = check(made, patch, "cpu", reps=2, mode=mode)
        finally:
            patch.remove()
        assert e.outputs_match and broken(e, [c for c, _, _ in kept]) is None, (mode, e.fired)
        assert e.fired == {large: 1.0, small: 3.0}, (mode, e.fired)
        assert e.within == {small: large}  # its fourth occurrence lay inside the larger region, which took it


def test_apply_keeps_both_kernels_and_its_check_passes(unet, tmp_path):
    """`kernelsmith apply` as optimize calls it, the kernels in its order (the smaller region's first: its share is
    the larger): both serve eager and compile mode, and the check passes."""
    _, cap, tasks = unet
    runs = []
    for task in tasks.values():
        code = (cap / task["file"]).read_text() + "\n\nModelNew = Model\n"
        runs.append(_run(tmp_path / f"runs/{task['name']}", cap / task["file"], [(code, 2.0)]))
    opts = ApplyOptions(modes=("eager", "compile"), reps=2, min_speedup=0.0)
    done = apply_runs(runs, cap, tmp_path / "unet_patch", opts)
    assert done.passed, done.reason
    assert [c.name for c in done.kernels] == [tasks["small"]["name"], tasks["large"]["name"]]
    assert all(c.modes == ["eager", "compile"] for c in done.kernels)
    assert all(e.fired[tasks["large"]["name"]] == 1.0 for e in done.checks)


def test_a_kernel_whose_every_region_a_larger_one_took_is_served_by_it_not_idle():
    """Where every occurrence of a kernel's region lay inside a larger kernel's taken region, it took none
    itself: the check does not fail it, and optimize's outcome says which kernel serves it."""
    chosen = [Chosen("runs/a", "gn_silu", 0.2, 3, 2.0, 1), Chosen("runs/b", "add_gn_silu", 0.1, 1, 2.0, 1)]
    e = E2E(outputs_match=True, mismatch=None, max_abs_err=0.0, trials=3)
    e.fired, e.within = {"gn_silu": 0.0, "add_gn_silu": 1.0}, {"gn_silu": "add_gn_silu"}
    assert took(chosen[0], e) and broken(e, chosen) is None
    applied = Applied(out_dir="p", entry="m.py:make", device="cpu", kernels=chosen, e2e=e, checks=[e])
    said = outcome(applied, "key", {})
    assert said.kernels["gn_silu"].served_by == "add_gn_silu" and said.kernels["add_gn_silu"].served_by is None
    e.fired["add_gn_silu"] = 0.0  # the larger took none either: both idle, as before
    assert broken(e, chosen) == "gn_silu, add_gn_silu never took its region (it did none of the model's work)"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
