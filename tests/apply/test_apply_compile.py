"""A patch a serving stack can run (issue 42): each kernel a PyTorch operator, a whole module's region
served by swapping its forward, the other regions replaced on torch.compile's graph, the end-to-end
check in each mode. CPU; what only a GPU shows (CUDA graphs, speed): benchmarks/device/patch_modes.sh."""

from __future__ import annotations

import copy
import inspect
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from conftest import OpsRan
from test_apply import HONEST, KS, LLAMA, _patch, _run, block  # noqa: F401  (block: the fixture)

from kernelsmith.apply.patch_dir import Chosen, choose, write_patch
from kernelsmith.apply.run import apply_runs
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.patch.install import install


@pytest.fixture(autouse=True)
def _removed(monkeypatch):
    """Every patch a test installs is removed after it: an installed patch's regions are replaced in any
    graph compiled in the process, and a later test's model would meet them."""
    import kernelsmith.patch.install as runtime

    patches = []

    def installing(*args, **kwargs):
        patches.append(runtime.install(*args, **kwargs))
        return patches[-1]

    monkeypatch.setattr(sys.modules[__name__], "install", installing)
    yield
    for patch in patches:
        patch.remove()


@pytest.fixture(autouse=True)
def _fresh_compiles():
    """Each compile here runs Inductor's passes: no graph from an earlier run's caches (a cached graph is
    as it was compiled, but its pass, and so its warning, does not run again)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield


NORM_NET = """
import torch
import torch.nn as nn


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(48) + 0.5)

    def forward(self, h):
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)
        self.norm = Norm()
        self.out = nn.Linear(48, 8)

    def forward(self, x):
        return self.out(self.norm(self.proj(x)))


def make():
    torch.manual_seed(0)
    return Net(), (torch.randn(4, 32),)
"""

# The norm region's kernel, with other ops than the model's (sqrt and div, no rsqrt), so that a test sees
# which ran.
NORM_KERNEL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn([48], dtype=torch.float32), requires_grad=False)

    def forward(self, x0):
        return x0 / torch.sqrt(x0.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
"""


@pytest.fixture
def norm_patch(tmp_path: Path):
    """A captured Net and a patch of its norm region (a whole module's forward)."""
    path = tmp_path / "norm_net.py"
    path.write_text(textwrap.dedent(NORM_NET))
    entry = f"{path}:make"
    capture(entry, tmp_path / "cap", forwards=1)
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    task = next(t for t in manifest["tasks"] if t["file"] and not t["fused"] and "rsqrt.default" in t["ops"])
    assert task["scopes"] == ["norm"]
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
    write_patch(tmp_path / "norm_patch", tmp_path / "cap", manifest, [(chosen, NORM_KERNEL, task)])
    return entry, tmp_path / "norm_patch", chosen.name


def test_a_whole_modules_region_swaps_its_forward_and_keeps_gradients(norm_patch):
    entry, patch_dir, name = norm_patch
    model, (x,) = call_entry(entry, "cpu").model, call_entry(entry, "cpu").args
    twin = copy.deepcopy(model)
    with torch.no_grad():
        want = model(x)
    patch = install(model, patch_dir)
    assert [s.path for s in patch.swaps] == ["norm"] and not patch.handles  # no dispatch mode at all
    assert "forward" in model.norm.__dict__ and patch.served(name).startswith("its modules' forward calls it (norm)")
    for mine, theirs in ((model, twin), (model.norm, twin.norm)):  # what reads a forward's parameters sees the same
        kinds = [[(p.name, p.kind) for p in inspect.signature(m.forward).parameters.values()] for m in (mine, theirs)]
        assert kinds[0] == kinds[1]
    with torch.no_grad():
        model(x)  # the first call traces the forward (its fake ops would be counted)
    patch.reset_counts()
    with torch.no_grad(), OpsRan() as ran:
        got = model(x)
    assert torch.allclose(got, want, atol=1e-5) and patch.counts[name].fired == 1
    assert ran.ops.get("rsqrt", 0) == 0 and ran.ops.get("sqrt", 0) == 1  # the kernel's ops, not the model's
    # Autograd records the call: the module's own forward runs, counted and said once; gradients are the model's.
    with pytest.warns(UserWarning, match="autograd"):
        model(x).sum().backward()
    twin(x).sum().backward()
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(model.parameters(), twin.parameters()))
    assert (patch.counts[name].fired, patch.counts[name].autograd) == (1, 1)
    # Another shape than the region's: the module's own forward, untouched.
    with torch.no_grad():
        assert torch.equal(model.norm(torch.ones(2, 48)), twin.norm(torch.ones(2, 48)))
    assert patch.counts[name].fired == 1
    patch.remove()
    assert "forward" not in model.norm.__dict__


def test_a_kernel_is_an_operator_torch_library_accepts(norm_patch):
    """The operator's schema, fake implementation and outputs (its own memory, the recorded layout), as
    torch.library.opcheck checks a custom op."""
    entry, patch_dir, name = norm_patch
    model = call_entry(entry, "cpu").model
    kop = install(model, patch_dir).ops[name]
    h = torch.randn(4, 48)
    assert torch.ops.kernelsmith_patch is not None and kop.op_name.startswith(name + "_")
    args = ([h], [model.norm.weight.detach()], kop.instance)
    torch.library.opcheck(kop.op, args, test_utils=("test_schema", "test_faketensor"))
    out = kop.op(*args)
    assert len(out) == 1 and out[0].shape == (4, 48) and out[0].untyped_storage().data_ptr() != h.data_ptr()


def test_two_models_patched_alike_each_run_their_own_install(norm_patch):
    """The same kernel installed on two models is one operator: each compiled call names its install, so
    each model's calls count in its own patch and run with its own parameters."""
    entry, patch_dir, name = norm_patch
    (one, x), two = (call_entry(entry, "cpu").model, call_entry(entry, "cpu").args[0]), call_entry(entry, "cpu").model
    with torch.no_grad():
        two.norm.weight.mul_(2.0)
        want = two(x)
    first, second = install(one, patch_dir), install(two, patch_dir)
    with torch.no_grad():
        torch.compile(one)(x)
        got = torch.compile(two)(x)
    assert (first.counts[name].fired, second.counts[name].fired) == (1, 1)
    assert torch.allclose(got, want, atol=1e-5)


def _compiled_block(block, tmp_path: Path):  # noqa: F811
    entry = call_entry(block[0], "cpu")
    model, (x,) = entry.model, entry.args
    reference = torch.compile(copy.deepcopy(model))  # compiled while the patch is installed: keeps its own ops
    patch = install(model, _patch(block, tmp_path, HONEST))
    return model, x, reference, patch, next(iter(patch.counts))


def test_a_compiled_model_runs_the_kernel_in_the_graph_and_keeps_gradients(block, tmp_path: Path):  # noqa: F811
    """The block's norm region shares its module with a Linear: the graph pass puts the operator in its
    place in torch.compile's graph; a graph autograd differentiates keeps the model's ops."""
    model, x, reference, patch, name = _compiled_block(block, tmp_path)
    assert not patch.swaps and patch.served(name).endswith("torch.compile compiles it into its graphs (inline.py)")
    compiled = torch.compile(model)
    with torch.no_grad():
        want = reference(x)
        assert patch.counts[name].fired == 0  # another model, compiled meanwhile: not the patch's
        got = compiled(x)
    assert torch.allclose(got, want, atol=1e-5)
    assert patch.counts[name].fired == 1 and not any(patch.dispatch.enabled.values())  # no dispatch mode
    kop = patch.ops[name]  # its own graph in Inductor's (inline.py): Inductor compiles it as the model's
    assert kop.inline_why is None and [len(c) for c in kop.inlined.values()] == [1]
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    # Inactive: compiled apart, as the model (the operator does not run).
    patch.active = False
    with torch.no_grad():  # the model's ops (Inductor may round them as eager does, or as the reference)
        assert torch.allclose(compiled(x), want, atol=1e-6, rtol=1e-6)
    assert patch.counts[name].fired == 1
    patch.active = True
    # Grad enabled and the parameters require it: a training graph, left as it is.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        compiled(x).sum().backward()
    assert patch.counts[name].fired == 1 and patch.counts[name].autograd == 1
    assert sum("differentiates" in str(w.message) for w in said) == 1


def test_a_second_compile_of_the_patched_model_traces_its_kernels_anew(block, tmp_path: Path, monkeypatch):  # noqa: F811
    """apply checks compile mode, then graphs mode, in one process: the second compile must not splice
    the first one's kernel graphs, whose values are the first compile's fake tensors (on an H100: graphs
    mode raised Inductor's "Mixing fake modes NYI" after compile mode passed)."""
    import kernelsmith.patch.inline as inline

    traces, trace = [], inline.trace
    monkeypatch.setattr(inline, "trace", lambda *a: traces.append(a) or trace(*a))
    model, x, reference, patch, name = _compiled_block(block, tmp_path)
    with torch.no_grad():
        want = reference(x)
        first = torch.compile(model)(x)
        torch._dynamo.reset()
        second = torch.compile(model, mode="max-autotune-no-cudagraphs")(x)
    assert torch.allclose(first, want, atol=1e-5) and torch.allclose(second, want, atol=1e-5)
    kop = patch.ops[name]
    assert patch.counts[name].fired == 2 and kop.inline_why is None
    assert len(traces) == 2  # once per compile, each on its own fake tensors


def test_a_kernel_slower_than_torch_compile_serves_eager_mode_only(block, tmp_path: Path):  # noqa: F811
    """A kernel's verdict against eager decides whether it serves eager mode; its verdict against
    torch.compile, whether compiled graphs take its regions (on an H100 the Llama step's kernels, each
    faster than eager, made the compiled step 5% slower than Inductor's own code for their regions)."""
    entry, cap, manifest, task = block
    runs = []
    for name, vs_compile in (("loses", 0.8), ("wins", 1.3)):
        store = RunStore(tmp_path / name)
        store.set_meta("task_source", (cap / task["file"]).read_text())
        store.add(Program(0, 0, "tune", HONEST, "correct", correct=True, speedup=2.0, speedup_vs_compile=vs_compile))
        store.close()
        runs.append(tmp_path / name)
    ((loses, code, _),) = choose(runs[:1], cap, manifest, 1.0)
    ((wins, _, _),) = choose(runs[1:], cap, manifest, 1.0)
    assert wins.compile_why is None and loses.why is None and code is not None
    assert loses.compile_why is not None and "0.8x torch.compile's" in loses.compile_why
    write_patch(tmp_path / "p", cap, manifest, [(loses, code, task)])
    made = call_entry(entry, "cpu")
    model, (x,) = made.model, made.args
    with torch.no_grad():
        want = model(x)
    patch = install(model, tmp_path / "p")
    name = loses.name
    assert patch.served(name).endswith(loses.compile_why)
    with torch.no_grad():
        assert torch.allclose(torch.compile(model)(x), want, atol=1e-5)
        assert patch.counts[name].fired == 0  # Inductor's own code for the region
        assert torch.allclose(model(x), want, atol=1e-5) and patch.counts[name].fired == 1  # eager: the kernel
    applied = apply_runs(runs[:1], cap, tmp_path / "checked", modes=("eager", "compile"), reps=2, min_speedup=1.0)
    passed, reason = applied.verdict()
    assert passed, reason  # CPU times are relative only: they leave no kernel out
    assert [e.mode for e in applied.checks] == ["eager"]  # no kernel serves compile mode: nothing to check there
    compiled = applied.modes[1]
    assert compiled.mode == "compile" and compiled.kernels == [] and not compiled.tried
    assert compiled.as_was == f"no kernel beat torch.compile's own code (their verdicts against it: {name} 0.8x)"
    assert applied.kernels[0].modes == ["eager"] and applied.kernels[0].left_out["compile"] == loses.compile_why
    assert "never took its region" not in reason and "does nothing" not in reason


def test_where_inductor_does_not_say_which_graphs_are_inference_the_graph_decides(block, tmp_path, monkeypatch):  # noqa: F811
    """torch without CustomInferenceAwareGraphPass calls the pass with the graph alone: the graph's AOT
    metadata (an output that requires grad) keeps a training graph as it is."""
    import torch._inductor.fx_passes.post_grad as post_grad

    monkeypatch.setattr(post_grad, "CustomInferenceAwareGraphPass", type("Absent", (), {}), raising=False)
    model, x, reference, patch, name = _compiled_block(block, tmp_path)
    compiled = torch.compile(model)
    with pytest.warns(UserWarning, match="differentiates"):
        grads = torch.autograd.grad(compiled(x).sum(), list(model.parameters()))
    want = torch.autograd.grad(reference(x).sum(), list(reference.parameters()))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, want)) and patch.counts[name].fired == 0
    with torch.no_grad():
        assert torch.allclose(compiled(x), reference(x), atol=1e-5)
    assert patch.counts[name].fired == 1


@pytest.fixture(scope="module")
def llama_runs(tmp_path_factory):
    """The tiny Llama captured (one profiled forward; its split regions, as optimize captures without --fused), with
    a run of our own seed on each seeded task. Fused regions under compile: tests/apply/test_apply_fused.py."""
    pytest.importorskip("transformers")
    work = tmp_path_factory.mktemp("llama42")
    capture(f"{LLAMA}:tiny_decode_step", work / "capture", forwards=1, fused=False)
    seeds = subprocess.run(
        [sys.executable, str(LLAMA.parent / "seeds.py"), str(work / "capture"), "--out", str(work / "seeds")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert seeds.returncode == 0, seeds.stderr
    runs = [
        _run(work / "runs" / s.stem, work / "capture" / s.name, [(s.read_text(), 1.0)])
        for s in sorted((work / "seeds").iterdir())
    ]
    return work, runs


def test_the_llama_decode_step_compiled_with_the_patch_runs_its_kernels(llama_runs):
    """Issue 42's promise on the CPU: the patched tiny Llama under torch.compile runs every kernel
    (module swap or graph pass), matches the model compiled without it, and compiles as one graph."""
    work, runs = llama_runs
    apply = lambda *a: subprocess.run(
        [str(KS), "apply", *map(str, runs), "--capture", "capture", "--min-speedup", "0", *a],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=600,
    )
    p = apply("--out", "p", "--mode", "compile", "--reps", "2")
    out = " ".join(p.stdout.split())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "compile: outputs match the compiled model's on 3 inputs" in out
    assert "compile: torch.compile: 0 graph breaks with the patch, 0 without" in out
    applied = json.loads((work / "p/apply.json").read_text())
    (e2e,) = applied["checks"]
    assert e2e["mode"] == "compile" and e2e["outputs_match"] and e2e["graph_breaks"] == [0, 0]
    kernels = [k["name"] for k in applied["kernels"] if k["why"] is None]
    assert all(e2e["fired"].get(e2e["merged"].get(n, n), 0) >= 1 for n in kernels), e2e["fired"]
    assert any("silu_mul" in n and e2e["fired"][n] == 2 for n in e2e["fired"])  # both layers', on the graph
    assert e2e["fired"]["llamarmsnorm"] == 1  # the first norm: a whole module, swapped
    q = apply("--out", "p2", "--mode", "graphs")
    assert q.returncode == 2 and q.stderr.strip().splitlines() == [
        "error: --mode graphs replays CUDA graphs: it needs --device cuda (this check runs on the cpu)"
    ], q.stderr


def test_a_kernel_inductor_cannot_trace_keeps_its_operator_and_says_why(block, tmp_path):  # noqa: F811
    """inline.py traces a kernel into Inductor's graph only where it traces on fake tensors with nothing
    of its own: one with a tensor of its own keeps its opaque operator, which runs (and counts) per call."""
    own = HONEST.replace(
        "requires_grad=False)\n", "requires_grad=False)\n        self.register_buffer('table', torch.ones(48))\n"
    ).replace("self.weight, 1e-6)", "self.weight * self.table, 1e-6)")
    entry = call_entry(block[0], "cpu")
    model, (x,) = entry.model, entry.args
    with torch.no_grad():
        want = model(x)
    patch = install(model, _patch(block, tmp_path, own))
    name = next(iter(patch.counts))
    compiled = torch.compile(model)
    with torch.no_grad():
        got = [compiled(x) for _ in range(3)]
    kop = patch.ops[name]
    assert (
        kop.inline_why is not None and "tensors of its own (table)" in kop.inline_why and not any(kop.inlined.values())
    )
    assert all(torch.allclose(g, want, atol=1e-5) for g in got) and patch.counts[name].fired == 3  # per call
