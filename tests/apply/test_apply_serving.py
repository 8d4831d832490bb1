"""Never slower (issue 54): a patch serves each mode only with the kernels that make it faster, measured in the
model; a mode no kernel makes faster runs the model as it was, and says so. The times are a CUDA run's on the
CPU (test_apply_timing.FakeGpuProfile: each aten op one kernel of 10 us), so what is slower is not left to
the CPU's noise; the runtime's side (patch.json's per-mode lists) under eager and torch.compile."""

from __future__ import annotations

import copy
import json
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_apply import BLOCK, HONEST, _patch, block  # noqa: F401  (block: the fixture)
from test_apply_compile import _fresh_compiles, norm_patch  # noqa: F401  (fixtures)
from test_apply_outputs import _package
from test_apply_timing import SLOW, captured_on_fake_gpu, fake_gpu  # noqa: F401  (fake_gpu: the fixture)
from typer.testing import CliRunner

from kernelsmith.apply.e2e import check, current_timers, trials
from kernelsmith.apply.gains import Part
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.apply.serving import Checking, broken, serve
from kernelsmith.apply.yardstick import measure
from kernelsmith.capture.entry import Entry, call_entry
from kernelsmith.capture.run import capture
from kernelsmith.cli.app import app
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.patch.install import install

# Two regions a kernel can take: the norm (pow .. gelu, 7 ops) and the gated scale (sigmoid, mul, mul).
TWO = """
import torch
import torch.nn as nn


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)
        self.weight = nn.Parameter(torch.rand(48) + 0.5)
        self.out = nn.Linear(48, 16)
        self.scale = nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        h = self.proj(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        h = self.out(torch.nn.functional.gelu(h))
        return torch.sigmoid(h) * h * self.scale


def make():
    torch.manual_seed(0)
    return Two(), (torch.randn(4, 32),)
"""

# The gated scale in two ops (silu, mul) where the model runs three: faster on the fake GPU.
GATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn([16], dtype=torch.float32), requires_grad=False)

    def forward(self, x0):
        return F.silu(x0) * self.scale
"""


@pytest.fixture(autouse=True)
def _removed(monkeypatch):
    """Every patch a test installs here is removed after it (an installed patch's pass stays in the process)."""
    import kernelsmith.patch.install as runtime

    patches = []

    def installing(*args, **kwargs):
        patches.append(runtime.install(*args, **kwargs))
        return patches[-1]

    monkeypatch.setattr(sys.modules[__name__], "install", installing)
    yield
    for patch in patches:
        patch.remove()


@pytest.fixture
def two(tmp_path, fake_gpu, monkeypatch):  # noqa: F811
    """TWO captured "on CUDA": (the capture folder, the norm's task, the gate's task)."""
    done = captured_on_fake_gpu(tmp_path, monkeypatch, TWO)
    norm = next(t for t in done.tasks if t.file and not t.fused and "gelu.default" in t.ops)
    gate = next(t for t in done.tasks if t.file and not t.fused and "sigmoid.default" in t.ops)
    return tmp_path / "cap", norm, gate


def _apply(tmp_path: Path, cap: Path, kernels: list, *flags: str):
    """`kernelsmith apply` in this process on one run per (task, code, verdict speedup): (the CLI's result,
    apply.json, patch.json)."""
    runs, label = [], len(list(tmp_path.glob("runs*")))
    for i, (task, code, speedup) in enumerate(kernels):
        store = RunStore(tmp_path / f"runs{label}" / f"run{i}")
        store.set_meta("task_source", (cap / task.file).read_text())
        timing = {"median_ms": 1.0, "std_ms": 0.0, "method": None}
        store.add(Program(0, 0, "tune", code, "correct", correct=True, speedup=speedup, eval={"timing": timing}))
        store.close()
        runs.append(str(tmp_path / f"runs{label}" / f"run{i}"))
    out = tmp_path / "two_patch"
    modes = [] if "--mode" in flags else ["--mode", "eager"]  # a capture on CUDA checks all three by default
    args = ["apply", *runs, "--capture", str(cap), "--out", str(out), "--reps", "3", *modes, *flags]
    said = CliRunner().invoke(app, args, terminal_width=400)
    read = lambda name: json.loads((out / name).read_text())
    return said, read("apply.json"), read("patch.json")


def test_a_kernel_that_slows_eager_mode_is_left_out_and_the_one_that_speeds_it_serves(two, tmp_path):
    """The norm's kernel does 30 multiplications more than the model (its regions cost more on the device),
    the gate's does in two ops what the model does in three: the first check names the slow one by its
    regions' time before (capture's share) and after, the second runs without it and is faster. The patch
    serves eager mode with the gate's kernel alone and exits 0; patch.json and apply.json say so per mode.
    --accept-slower eager: the eager (wall) time is the CPU's, not the fake GPU's."""
    cap, norm, gate = two
    slow, fast = Path(norm.file).stem, Path(gate.file).stem
    said, applied, spec = _apply(tmp_path, cap, [(norm, SLOW, 2.0), (gate, GATE, 1.5)], "--accept-slower", "eager")
    out = " ".join(said.output.split())
    assert said.exit_code == 0 and applied["passed"], out
    eager = applied["modes"][0]
    assert eager["mode"] == "eager" and eager["checked"] and eager["kernels"] == [fast] and eager["as_was"] is None
    first, second = eager["tried"]
    assert sorted(first["kernels"]) == sorted([slow, fast]) and list(first["left_out"]) == [slow]
    assert first["speedup"] < 1 < second["speedup"] == eager["speedup"] and second["kernels"] == [fast]
    assert first["left_out"][slow].startswith("its regions took ") and "ms per forward in device time" in out
    kernels = {k["name"]: k for k in applied["kernels"]}
    assert kernels[fast]["modes"] == ["eager"] and kernels[slow]["modes"] == []
    assert kernels[slow]["left_out"]["eager"] == first["left_out"][slow]
    assert kernels[fast]["left_out"]["compile"] == "not checked (--mode compile measures it)"
    written = {k["name"]: k for k in spec["kernels"]}
    assert written[fast]["modes"] == ["eager"] and written[slow]["modes"] == []
    assert spec["served"]["eager"] == eager["said"] == f"eager: 1 kernel, {second['speedup']:.3g}x (device time)"
    assert f"eager: left out {slow}: its regions took" in out
    assert (
        f"served: eager: 1 kernel, {second['speedup']:.3g}x (device time); compile: as the model was, not checked"
        in out
    )
    (check_,) = applied["checks"]  # the check that decided eager mode: the gate's kernel alone
    assert check_["fired"][fast] == 1 and slow in check_["unserved"] and applied["e2e"] == check_
    # The runtime serves by patch.json: the slow kernel is not in eager mode's way at all.
    entry = call_entry(applied["entry"], "cpu")
    patch = install(entry.model, tmp_path / "two_patch", "cpu")
    assert patch.serving("eager") == [fast] and patch.serving("compile") == []
    with torch.no_grad():
        entry.model(*entry.args)
    assert (patch.counts[fast].fired, patch.counts[slow].fired) == (1, 0)
    assert patch.served(slow).startswith("not in eager mode: its regions took")


def test_a_mode_no_kernel_makes_faster_runs_as_the_model_was_and_says_so(two, tmp_path):
    """The slow kernel alone: eager mode runs the model as it was (the kernel is in the patch, serving no
    mode), exit 0, the line says which kernel made it slower and by how much; the package's apply() puts
    nothing in the model's way (counts 0). --accept-slower all keeps it, as measured, and says so."""
    cap, norm, _ = two
    slow = Path(norm.file).stem
    said, applied, spec = _apply(tmp_path, cap, [(norm, SLOW, 2.0)])
    out = " ".join(said.output.split())
    assert said.exit_code == 0 and applied["passed"] and not applied["checks"], out
    eager = applied["modes"][0]
    assert eager["kernels"] == [] and eager["as_was"].startswith(f"{slow} made it slower (")
    assert eager["as_was"].endswith("x device time)") and eager["tried"][0]["speedup"] < 1
    assert spec["kernels"][0]["modes"] == [] and spec["check"]["passed"]
    assert f"eager: as the model was, {slow} made it slower" in out
    assert "(the patch serves no mode: the model runs as it was)" in out
    assert applied["reason"].startswith("passed, but the patch serves no mode: eager: as the model was")
    entry = call_entry(applied["entry"], "cpu")
    with torch.no_grad():
        want = entry.model(*entry.args)
        said = f"two_patch: serves no mode, the model runs as it was: eager: as the model was, {slow}"
        with pytest.warns(UserWarning, match=said):
            patch = _package(tmp_path / "two_patch").apply(entry.model, "cpu")
        got = entry.model(*entry.args)
    assert torch.equal(got, want) and patch.counts[slow].fired == 0 and patch.covers is None
    assert not patch.serving("eager")
    patch.remove()
    said, applied, spec = _apply(tmp_path, cap, [(norm, SLOW, 2.0)], "--accept-slower", "all")
    out = " ".join(said.output.split())
    assert said.exit_code == 0 and applied["modes"][0]["kernels"] == [slow] and spec["kernels"][0]["modes"] == ["eager"]
    assert applied["slower"][0]["accepted"] == "accepted: --accept-slower all"
    assert "-> check passed, but the patched forward is slower: device time" in out


def _two_norms(tmp_path: Path) -> tuple[str, Path, list[Chosen]]:
    """TWO captured on the CPU and a patch of three kernels: the norm's twice (two tasks of the same ops, as
    a layer's norm and the final one are: one merges into the other, the faster by its verdict, which loses
    to torch.compile's code) and the gate's."""
    path = tmp_path / "two_model.py"
    path.write_text(textwrap.dedent(TWO))
    capture(f"{path}:make", tmp_path / "cap", forwards=1)
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    norm = next(t for t in manifest["tasks"] if t["file"] and not t["fused"] and "gelu.default" in t["ops"])
    gate = next(t for t in manifest["tasks"] if t["file"] and not t["fused"] and "sigmoid.default" in t["ops"])
    twin = dict(norm, name="final_norm", file="final_norm.py")
    (tmp_path / "cap/final_norm.py").write_text((tmp_path / "cap" / norm["file"]).read_text())
    made = lambda t, speedup: Chosen("runs/x", Path(t["file"]).stem, t["share"], t["calls"], speedup, 1)
    layer, final, gated = made(norm, 2.0), made(twin, 3.0), made(gate, 2.0)
    final.compile_why = "torch.compile keeps its own code for its regions: the kernel's verdict is 0.8x torch.compile's"
    final.speedup_vs_compile = 0.8
    picks = [(layer, HONEST, norm), (final, HONEST, twin), (gated, GATE, gate)]
    write_patch(tmp_path / "p", tmp_path / "cap", manifest, picks)
    return f"{path}:make", tmp_path / "p", [layer, final, gated]


def test_a_kernel_whose_regions_another_serves_is_not_never_took_where_that_one_does_not_serve(tmp_path):
    """Issue 54, on an H100: "compile: ..._llamarmsnorm never took its region" when its regions were served
    in eager mode by the kernel it merged into, which torch.compile keeps its own code for. In compile mode
    it is not expected to take them: the check passes (the gate's kernel serves), and says why it did not."""
    spec, out, kernels = _two_norms(tmp_path)
    layer, final, gated = kernels
    entry = call_entry(spec, "cpu")
    patch = install(entry.model, out, "cpu")
    assert patch.merged == {layer.name: final.name} and patch.serving("compile") == [gated.name]
    done = check(entry, patch, "cpu", reps=2, mode="compile")
    assert done.outputs_match and done.fired == {final.name: 0.0, gated.name: 1.0}
    assert broken(done, kernels) is None
    assert (
        done.unserved[layer.name]
        == f"its regions are {final.name}'s, which does not serve compile mode: {final.compile_why}"
    )
    assert done.unserved[final.name] == final.compile_why
    eager = check(entry, patch, "cpu", reps=2)  # eager: the kept kernel takes both norms' regions
    assert broken(eager, kernels) is None and eager.fired[final.name] == 1 and not eager.unserved


def test_apply_serves_compile_mode_with_the_kernels_that_may_serve_it(tmp_path, monkeypatch):
    """serve() on the CPU (times relative only: nothing is left out for them): eager with every kernel, compile
    with the gate's alone (the norms' regions are Inductor's there), graphs not checked: patch.json says so."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec, out, kernels = _two_norms(tmp_path)
    entry = call_entry(spec, "cpu")
    yard = measure(entry.model, trials(entry), "cpu")
    parts = {c.name: Part(c.share, c.calls, c.speedup or 1.0) for c in kernels}
    opts = ApplyOptions(modes=("eager", "compile"), reps=2)
    ck = Checking(entry, out, "cpu", opts, current_timers(), yard, parts, "CPU time", install)
    checks, modes = serve(ck, kernels)
    assert [e.mode for e in checks] == ["eager", "compile"] and all(broken(e, kernels) is None for e in checks)
    assert [m.kernels for m in modes] == [[kernels[1].name, kernels[2].name], [kernels[2].name], []]
    assert modes[2].said == "graphs: as the model was, not checked (--mode graphs measures it)"
    written = {k["name"]: k["modes"] for k in json.loads((out / "patch.json").read_text())["kernels"]}
    assert written == {kernels[0].name: ["eager"], kernels[1].name: ["eager"], kernels[2].name: ["eager", "compile"]}


def test_a_kernel_that_should_take_its_regions_and_does_not_still_fails(block, tmp_path):  # noqa: F811
    """Peek reads the norm's inner value: the kernel serves eager and compile mode there but cannot take its
    region in either, and did none of the model's work: the check fails, as before."""
    namespace: dict = {}
    exec(textwrap.dedent(BLOCK), namespace)
    torch.manual_seed(0)
    model = namespace["Peek"]().eval()
    entry = Entry("peek", model, (torch.randn(4, 32),), {})
    name = Path(block[3]["file"]).stem
    chosen = Chosen("runs/x", name, block[3]["share"], block[3]["calls"], 2.0, 1)
    patch = install(model, _patch(block, tmp_path, HONEST))
    for mode in ("eager", "compile"):
        done = check(entry, patch, "cpu", reps=2, mode=mode)
        assert broken(done, [chosen]) == f"{name} never took its region (it did none of the model's work)"


def _modes(patch_dir: Path, modes: list[str]) -> None:
    spec = json.loads((patch_dir / "patch.json").read_text())
    for entry in spec["kernels"]:
        entry["modes"] = modes
    (patch_dir / "patch.json").write_text(json.dumps(spec))


@pytest.mark.parametrize("modes", [["eager"], ["compile"], ["graphs"], []])
def test_the_runtime_serves_each_mode_with_the_kernels_patch_json_gives_it(norm_patch, modes):  # noqa: F811
    """Eager mode uses only the kernels serving eager; inside torch.compile the pass takes the regions of the
    kernels serving that compile's mode: graphs where Inductor's `triton.cudagraphs` is on, as
    torch.compile(mode="reduce-overhead") sets it (on the CPU Inductor then skips the CUDA graphs)."""
    entry, patch_dir, name = norm_patch
    _modes(patch_dir, modes)
    made = call_entry(entry, "cpu")
    model, (x,) = made.model, made.args
    twin = copy.deepcopy(model)
    patch = install(model, patch_dir)
    assert patch.serving("eager") == ([name] if "eager" in modes else [])
    assert bool(patch.swaps) == ("eager" in modes) and (patch.unguard is not None) == bool(set(modes) - {"eager"})
    fired = {}
    with torch.no_grad():
        want = twin(x)
        for mode, run in (("eager", model), ("compile", torch.compile(model)), ("graphs", None)):
            if mode == "graphs":
                torch._dynamo.reset()
                run = torch.compile(model, mode="reduce-overhead")
            patch.reset_counts()
            assert torch.allclose(run(x), want, atol=1e-5)
            fired[mode] = patch.counts[name].fired
    assert fired == {m: int(m in modes) for m in ("eager", "compile", "graphs")}, fired


def test_the_passs_cache_key_names_the_compiles_mode_and_its_kernels(norm_patch, monkeypatch):  # noqa: F811
    """Inductor's cache keeps a graph by the pass's uuid: a compile for graphs mode and one for compile mode,
    or two selections of kernels, must not share a cached graph."""
    import torch._inductor.config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    import kernelsmith.patch.graph_pass as graph_pass

    entry, patch_dir, name = norm_patch
    _modes(patch_dir, ["compile"])
    patch = install(call_entry(entry, "cpu").model, patch_dir)
    context = type("Compile", (), {})()  # a compile that traced the patched model
    patch.compiles.add(context)
    monkeypatch.setattr(graph_pass, "compile_id", lambda: context)
    keys = {}
    for graphs in (False, True):
        with inductor_config.patch({"triton.cudagraphs": graphs}):
            keys[graphs] = graph_pass._REPLACER.uuid(CustomGraphPass)
            assert [k.name for k in graph_pass._REPLACER.live()] == ([] if graphs else [name])
    assert keys[False] != keys[True]
    patch.ops[name].modes = frozenset({"compile", "graphs"})
    with inductor_config.patch({"triton.cudagraphs": True}):
        assert graph_pass._REPLACER.uuid(CustomGraphPass) != keys[True]
