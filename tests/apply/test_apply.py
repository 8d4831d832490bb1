"""`kernelsmith apply`: the best kernels of runs on captured tasks, substituted into the model and
checked end to end (CPU; the Llama case with the Triton interpreter)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import REPO, OpsRan

from kernelsmith.apply.e2e import check, current_timers, trials
from kernelsmith.apply.patch_dir import Chosen, choose, read_capture, write_patch
from kernelsmith.apply.run import Applied
from kernelsmith.apply.yardstick import measure
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.patch.install import PatchError, install

LLAMA = REPO / "examples/llama_decode/model.py"
KS = Path(sys.executable).parent / "kernelsmith"

BLOCK = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)
        self.weight = nn.Parameter(torch.rand(48) + 0.5)

    def forward(self, x):
        h = self.proj(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return torch.nn.functional.gelu(h)


class Peek(Block):
    '''The same first ops, but the model reads the mean of squares itself before the norm ends.'''

    def forward(self, x):
        h = self.proj(x)
        ms = h.pow(2).mean(-1, keepdim=True)
        seen = ms.sum() * 0
        h = h * torch.rsqrt(ms + 1e-6) * self.weight
        return torch.nn.functional.gelu(h) + seen


class Late(Block):
    '''The same region, but the model reads its inner mean of squares after the region has ended.'''

    def forward(self, x):
        h = self.proj(x)
        ms = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(ms + 1e-6) * self.weight
        return torch.nn.functional.gelu(h) + ms.sum()


class InPlace(Block):
    def forward(self, x):
        h = self.proj(x)
        h.mul_(2.0)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return torch.nn.functional.gelu(h)


class Sliced(Block):
    '''The norm region ends in a slice of the GELU's output: part of a value, which no kernel output gives.'''

    def __init__(self):
        super().__init__()
        self.out = nn.Linear(16, 8)

    def forward(self, x):
        h = self.proj(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return self.out(torch.nn.functional.gelu(h)[:, :16])


def make():
    torch.manual_seed(0)
    return Block(), (torch.randn(4, 32),)


def make_sliced():
    torch.manual_seed(0)
    return Sliced(), (torch.randn(4, 32),)


def make_in_place():
    torch.manual_seed(0)
    return InPlace(), (torch.randn(4, 32),)
"""

# A kernel for the norm region, written with other ops than the model's (so that the test can see
# which ran): F.rms_norm, then gelu.
HONEST = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn([48], dtype=torch.float32), requires_grad=False)

    def forward(self, x0):
        return F.gelu(F.rms_norm(x0, [48], self.weight, 1e-6))
"""
# Right on its task (same seed, same weights), wrong in the model: it copied the weight at __init__.
KEPT_WEIGHTS = HONEST.replace(
    "requires_grad=False)\n",
    "requires_grad=False)\n        self.register_buffer('frozen', self.weight.detach().clone())\n",
).replace("self.weight, 1e-6", "self.frozen, 1e-6")


@pytest.fixture
def block(tmp_path: Path):
    path = tmp_path / "block_model.py"
    path.write_text(textwrap.dedent(BLOCK))
    entry = f"{path}:make"
    done = capture(entry, tmp_path / "cap")
    norm = next(t for t in done.tasks if t.file and not t.fused and "gelu.default" in t.ops)
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    return entry, tmp_path / "cap", manifest, next(t for t in manifest["tasks"] if t["name"] == norm.name)


def _patch(block, tmp_path: Path, code: str, name: str = "patch_a") -> Path:
    _, cap, manifest, task = block
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
    write_patch(tmp_path / name, cap, manifest, [(chosen, code, task)])
    return tmp_path / name


def _run(run_dir: Path, task_file: Path, codes: list[tuple[str, float]]) -> Path:
    """A search's store on `task_file`: one correct program per (code, speedup), iterations 0, 1, ..."""
    store = RunStore(run_dir)
    store.set_meta("task_source", task_file.read_text())
    for i, (code, speedup) in enumerate(codes):
        store.add(Program(i, 0, "tune", code, "correct", correct=True, speedup=speedup))
    store.close()
    return run_dir


def test_the_kernel_does_the_region_and_the_model_the_rest(block, tmp_path: Path):
    entry = call_entry(block[0], "cpu")
    model, (x,) = entry.model, entry.args
    with torch.no_grad(), OpsRan() as before:
        want = model(x)
    state = torch.random.get_rng_state()
    patch = install(model, _patch(block, tmp_path, HONEST))
    assert torch.equal(torch.random.get_rng_state(), state)  # installing leaves the caller's random state
    assert patch.dispatch.kernels and block[3]["scopes"] == [""]  # the region runs in the model's own forward
    with torch.no_grad():
        model(x)  # the first call traces the forward (its fake ops would be counted)
    patch.reset_counts()
    with torch.no_grad(), OpsRan() as after:
        got = model(x)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    name = next(iter(patch.counts))
    assert patch.counts[name].fired == 1 and patch.counts[name].dropped == 0
    # The region's ops did not run (the kernel's rms_norm did); the GEMM outside it still did.
    assert after.top.get("rsqrt", 0) == 0 and after.top.get("pow", 0) == 0 and before.top["rsqrt"] == 1
    assert after.ops.get("addmm") == before.ops["addmm"] == 1
    patch.remove()
    with torch.no_grad(), OpsRan() as removed:
        again = model(x)
    assert torch.equal(again, want) and removed.ops == before.ops


def test_a_patch_never_changes_gradients(block, tmp_path: Path):
    """Where autograd records the region (grad enabled and an input or parameter of it requires grad)
    the model's own ops run, counted and said once; the kernel serves only where no graph is recorded."""
    entry = call_entry(block[0], "cpu")
    model, (x,) = entry.model, entry.args
    twin = copy.deepcopy(model)

    def grads(m: torch.nn.Module, x_grad: bool = True) -> list[torch.Tensor]:
        m.zero_grad()
        xg = x.clone().requires_grad_(x_grad)
        m(xg).pow(2).sum().backward()
        return ([xg.grad] if x_grad else []) + [p.grad for p in m.parameters()]

    want, want_params = grads(twin), grads(twin, x_grad=False)
    patch = install(model, _patch(block, tmp_path, HONEST))
    with pytest.warns(UserWarning) as said:
        got, got_params = grads(model), grads(model, x_grad=False)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(got_params, want_params, strict=True))
    counts = next(iter(patch.counts.values()))
    assert (counts.fired, counts.autograd) == (0, 2)
    assert len(said) == 1 and "patch_a" in str(said[0].message) and "autograd" in str(said[0].message)
    with torch.no_grad():
        model(x)
    model.requires_grad_(False)  # grad enabled, but nothing of the region requires it: no graph, the kernel serves
    model(x)
    assert (counts.fired, counts.autograd) == (2, 2)


def test_patch_json_names_the_program_by_its_id_and_keeps_its_iteration(block, tmp_path: Path):
    _, cap, manifest, task = block
    run = _run(tmp_path / "run", cap / task["file"], [(HONEST, 1.0), (HONEST + "\n# faster\n", 3.0)])
    store = RunStore.open_readonly(run)
    best = store.best()
    store.close()
    assert best is not None and best.id is not None and best.id != best.iteration  # ids count from 1
    picks = choose([run], cap, read_capture(cap))
    write_patch(tmp_path / "p", cap, manifest, picks)
    entry = json.loads((tmp_path / "p/patch.json").read_text())["kernels"][0]
    assert (entry["program"], entry["iteration"]) == (best.id, best.iteration) == (2, 1)


# HONEST, then a Triton kernel that copies the result through triton.language's own jitted functions
# (tl.max, tensor.max, tl.sum): on the CPU it runs only in Triton's interpreter.
TRITON = (
    HONEST.replace(
        "import torch.nn.functional as F\n",
        "import torch.nn.functional as F\nimport triton\nimport triton.language as tl\n",
    )
    .replace("        return F.gelu(", "        return _copy(F.gelu(")
    .rstrip()
    + """)


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n, other=0.0)
    x = x - tl.max(x, axis=0) + x.max(0) + tl.sum(x * 0.0, axis=0)
    tl.store(dst + offs, x, mask=offs < n)


def _copy(x):
    out = torch.empty_like(x)
    _copy_kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out
"""
)


@pytest.mark.parametrize(
    "triton_first, set_late, gpu",
    [(False, False, True), (True, False, False), (True, True, False), (True, False, True)],
)
def test_a_patch_of_triton_kernels_used_on_the_cpu_sets_the_interpreter_or_says_it_must_be_set(
    block, tmp_path: Path, triton_first: bool, set_late: bool, gpu: bool
):
    """Without TRITON_INTERPRET when Python started: the patch sets it before triton is imported; where
    triton was imported first (as loading a Hugging Face model does) and torch sees no GPU, triton.language's
    own jitted functions (tl.sum, tl.max, x.max()) run in the interpreter too, whether the patch or the user
    set the switch late; with a GPU there, installing refuses in one line, before any forward. `kernelsmith
    apply` sets the switch before anything imports triton, so only a fresh process shows this."""
    _patch(block, tmp_path, TRITON, "patch_t")
    use = f"""
import os, sys, torch
sys.path.insert(0, {str(tmp_path)!r})
{"import triton" if triton_first else ""}
{"os.environ['TRITON_INTERPRET'] = '1'" if set_late else ""}
import block_model, patch_t
model, (x,) = block_model.make()
with torch.no_grad():
    want = model(x)
    available, torch.cuda.is_available = torch.cuda.is_available, lambda: {gpu}  # what install sees
    try:
        patch = patch_t.apply(model)
    except Exception as exc:
        print(type(exc).__name__ + ":", exc)
        raise SystemExit(0)
    torch.cuda.is_available = available  # the forward runs on this machine as it is
    got = model(x)
print(torch.allclose(got, want, atol=1e-5), patch.counts["{Path(block[3]["file"]).stem}"].fired)
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", use], capture_output=True, text=True, env=env, timeout=300)
    said = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-2000:]
    if triton_first and gpu:
        assert said == (
            "PatchError: the patch's Triton kernels run on the CPU only in Triton's interpreter: set "
            "TRITON_INTERPRET=1 before Python starts (triton was imported without it, and a GPU is there, so the "
            "patch does not switch Triton over)"
        ), p.stdout + p.stderr
    else:
        assert said == "True 1", p.stdout + p.stderr


def test_a_patch_folder_is_rewritten_but_a_file_of_the_users_there_is_not_lost(block, tmp_path: Path):
    from kernelsmith.errors import UserError

    out = _patch(block, tmp_path, HONEST)
    _patch(block, tmp_path, HONEST)  # a previous patch is replaced
    (out / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds files of its own besides a patch"):
        _patch(block, tmp_path, HONEST)
    assert (out / "notes.txt").read_text() == "mine" and (out / "patch.json").is_file()


@pytest.mark.parametrize("variant", ["Peek", "Late"])
def test_a_region_whose_inner_value_the_model_reads_is_left_to_the_models_ops(block, tmp_path, variant):
    """Peek reads the mean of squares before the region ends, Late after it: a value the region makes but
    does not return, so the kernel cannot take the region; the model's own ops run there, and the patch
    says why."""
    namespace: dict = {}
    exec(textwrap.dedent(BLOCK), namespace)
    torch.manual_seed(0)
    model, x = namespace[variant]().eval(), torch.randn(4, 32)
    with torch.no_grad():
        want = model(x)
        patch = install(model, _patch(block, tmp_path, HONEST))
        got = model(x)
    counts = next(iter(patch.counts.values()))
    assert (counts.fired, counts.dropped, counts.recomputed) == (0, 0, 0)
    assert torch.equal(got, want)
    assert patch.covers is not None and any("reads a value the region makes" in r for r in patch.covers.refused)


def test_a_kernel_whose_tensors_are_named_otherwise_is_bound_by_their_order(block, tmp_path: Path):
    """Evaluation builds Model and ModelNew from one seed, whatever the names: where ModelNew's tensors
    are Model's in count, order, shapes and dtypes, each takes the place of the one in the same place."""
    entry = call_entry(block[0], "cpu")
    model, (x,) = entry.model, entry.args
    with torch.no_grad():
        want = model(x)
    renamed = HONEST.replace("self.weight = nn.Parameter(", "self.scale = nn.Parameter(").replace(
        "self.weight,", "self.scale,"
    )
    patch = install(model, _patch(block, tmp_path, renamed))
    with torch.no_grad():
        got = model(x)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5) and next(iter(patch.counts.values())).fired == 1
    patch.remove()
    # One tensor more than Model's: no order to go by, and the error says what to do.
    extra = renamed.replace("    def forward", "        self.shift = nn.Parameter(torch.zeros(48))\n\n    def forward")
    with pytest.raises(PatchError) as exc:
        install(entry.model, _patch(block, tmp_path, extra, "patch_e"))
    assert str(exc.value).endswith(
        "ModelNew has no tensor `weight` of torch.float32[48] to take the model's own, and its tensors (scale "
        "torch.float32[48], shift torch.float32[48]) are not Model's (weight torch.float32[48]) in order: name "
        "them as Model's, or keep Model's count, order, shapes and dtypes"
    )
    assert "\n" not in str(exc.value)
    with pytest.raises(PatchError, match="loading its task or kernel raised NameError"):
        install(entry.model, _patch(block, tmp_path, HONEST + "\nundefined_name\n", "patch_b"))


def test_a_region_that_writes_its_input_in_place_is_substituted(tmp_path: Path):
    """`h.mul_(2.0)` on the Linear's output, then the norm: the task scales a clone of h; the kernel
    (here the task's own Model) serves the region and h is written as the model's mul_ writes it."""
    path = tmp_path / "block_model.py"
    path.write_text(textwrap.dedent(BLOCK))
    capture(f"{path}:make_in_place", tmp_path / "cap")
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    task = next(t for t in manifest["tasks"] if t["file"] and not t["fused"] and "gelu.default" in t["ops"])
    assert "mul_.Tensor" in task["ops"]
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
    kernel = (tmp_path / "cap" / task["file"]).read_text() + "\n\nModelNew = Model\n"
    write_patch(tmp_path / "p", tmp_path / "cap", manifest, [(chosen, kernel, task)])
    entry = call_entry(f"{path}:make_in_place", "cpu")
    patch = install(entry.model, tmp_path / "p")
    assert not patch.skipped
    done = check(entry, patch, "cpu", reps=2)
    assert done.outputs_match and done.fired == {chosen.name: 1.0}
    assert Applied(out_dir=str(tmp_path / "p"), entry="e", device="cpu", kernels=[chosen], e2e=done).ok


def test_an_apply_whose_every_kernel_is_left_out_fails_and_says_why(tmp_path: Path):
    path = tmp_path / "block_model.py"
    path.write_text(textwrap.dedent(BLOCK))
    capture(f"{path}:make_sliced", tmp_path / "cap")
    task = next(
        t
        for t in read_capture(tmp_path / "cap")["tasks"]
        if t["file"] and not t["fused"] and "gelu.default" in t["ops"]
    )
    assert task["ops"][-1] == "slice.Tensor"
    run = _run(tmp_path / "run", tmp_path / "cap" / task["file"], [(HONEST, 2.0)])
    p = subprocess.run(
        [str(KS), "apply", str(run), "--capture", "cap", "--out", "p", "--reps", "2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    out = " ".join(p.stdout.split())
    why = "an output is made by aten.slice.Tensor after its last compute op"
    assert p.returncode == 1 and f"not substituted: {why}" in out, p.stdout + p.stderr
    assert (
        f"-> check failed: no kernel could be substituted, so the patch does nothing ({task['file'][:-3]}: {why}" in out
    )
    applied = json.loads((tmp_path / "p/apply.json").read_text())
    assert applied["e2e"]["outputs_match"] and applied["e2e"]["skipped"]


def test_apply_on_a_cpu_capture_keeps_kernels_slower_than_their_reference_unless_told(block, tmp_path: Path):
    """A CPU capture's runs time Triton's interpreter, so every verdict speedup is below 1: --min-speedup
    defaults to 0 there (1 elsewhere), and `--min-speedup 1` leaves them out, in one line."""
    _, cap, _, task = block
    run = _run(tmp_path / "run", cap / task["file"], [(HONEST, 0.01)])
    apply = lambda *a: subprocess.run(
        [str(KS), "apply", str(run), "--capture", str(cap), "--no-check", *a], capture_output=True, text=True
    )
    p = apply("--out", str(tmp_path / "p"))
    assert p.returncode == 0 and json.loads((tmp_path / "p/apply.json").read_text())["kernels"][0]["why"] is None
    p = apply("--out", str(tmp_path / "p1"), "--min-speedup", "1")
    assert p.returncode == 2 and "below --min-speedup 1" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_patch_folder_that_cannot_be_imported_is_refused_with_a_name_that_can(block, tmp_path: Path):
    _, cap, _, task = block
    run = _run(tmp_path / "run", cap / task["file"], [(HONEST, 2.0)])
    out = tmp_path / "patches" / "my patch-1"
    p = subprocess.run(
        [str(KS), "apply", str(run), "--capture", str(cap), "--out", str(out), "--no-check"],
        capture_output=True,
        text=True,
    )
    said = " ".join(p.stderr.split())
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stdout + p.stderr
    assert "'my patch-1' cannot be imported as a package" in said and f"try --out {out.parent}/my_patch_1" in said
    assert not out.exists()


def test_the_check_passes_an_honest_kernel_and_fails_one_that_kept_the_task_weights(block, tmp_path: Path):
    timers = current_timers()
    entry = call_entry(block[0], "cpu")
    honest = check(entry, install(entry.model, _patch(block, tmp_path, HONEST)), "cpu", reps=2, timers=timers)
    assert honest.outputs_match and honest.forged is None and list(honest.fired.values()) == [1.0]
    assert [t.measure for t in honest.timings] == ["CPU time", "CPU wall time"] and honest.trials == 3
    entry = call_entry(block[0], "cpu")
    kept = check(entry, install(entry.model, _patch(block, tmp_path, KEPT_WEIGHTS, "patch_k")), "cpu", reps=2)
    assert not kept.outputs_match and "out of tolerance" in (kept.mismatch or "") and not kept.timings
    raises = HONEST.replace("return F.gelu(", "raise RuntimeError('launch failed\\nat line 3')\n        return F.gelu(")
    entry = call_entry(block[0], "cpu")
    failed = check(entry, install(entry.model, _patch(block, tmp_path, raises, "patch_r")), "cpu", reps=2)
    assert not failed.outputs_match and failed.trials == 0
    assert failed.mismatch == "the patched model raised RuntimeError: launch failed at line 3"


def test_the_check_sees_the_kernels_output_one_off_by_1e_3_fails(block, tmp_path: Path):
    """Issue 41: outputs matched with max abs err exactly 0 while kernels of another rounding ran. The
    compared outputs are the kernel's: the honest kernel took its region and matches (to the bit with
    torch 2.13 on the CPU, where rms_norm rounds as the model's ops do), and the same kernel off by 1e-3 fails the check."""
    entry = call_entry(block[0], "cpu")
    honest = check(entry, install(entry.model, _patch(block, tmp_path, HONEST)), "cpu", reps=2)
    assert honest.outputs_match and list(honest.fired.values()) == [1.0] and honest.max_abs_err <= 1e-6
    off = HONEST.replace(
        "return F.gelu(F.rms_norm(x0, [48], self.weight, 1e-6))",
        "return F.gelu(F.rms_norm(x0, [48], self.weight, 1e-6)) + 1e-3",
    )
    assert off != HONEST
    entry = call_entry(block[0], "cpu")
    yard = measure(entry.model, trials(entry), "cpu")  # the float64 run, before the patch is installed
    done = check(entry, install(entry.model, _patch(block, tmp_path, off, "patch_off")), "cpu", reps=2, yardstick=yard)
    assert not done.outputs_match and list(done.fired.values()) == [1.0] and not done.timings
    assert done.max_abs_err == pytest.approx(1e-3, rel=1e-3) and "out of tolerance" in (done.mismatch or "")
    # Judged against the model's own rounding too: ~1e-7 at float32, the kernel's 1e-3 thousands of times past it.
    assert done.outputs_rule == "own error" and done.own_error is not None and done.own_error.ratio > 1000
    assert "more than 4x" in (done.mismatch or "")
    chosen = Chosen("runs/x", Path(block[3]["file"]).stem, block[3]["share"], block[3]["calls"], 2.0, 1)
    assert (
        Applied(out_dir=str(tmp_path / "patch_off"), entry="e", device="cpu", kernels=[chosen], e2e=done).failure
        == done.mismatch
    )


def test_redrawn_inputs_differ_and_keep_integers(block):
    from kernelsmith.apply.e2e import _redraw

    base = ((torch.randn(8, 4), torch.arange(5)), {"cache": [torch.randn(3)]})
    fresh = _redraw(base, 1)
    assert not torch.equal(fresh[0][0], base[0][0]) and torch.equal(fresh[0][1], base[0][1])
    assert not torch.equal(fresh[1]["cache"][0], base[1]["cache"][0]) and fresh[0][0].shape == (8, 4)


def test_the_llama_example_finds_the_projects_kernelsmith_without_an_activated_venv(tmp_path: Path):
    """run.sh with no kernelsmith on PATH: it takes the project's .venv/bin/kernelsmith (and the Python
    beside it), or says in one line how to give it one."""
    example = tmp_path / "examples/llama_decode"
    example.mkdir(parents=True)
    shutil.copy(REPO / "examples/llama_decode/run.sh", example / "run.sh")
    bin_dir = tmp_path / ".venv/bin"
    bin_dir.mkdir(parents=True)
    for name in ("kernelsmith", "python"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*"\nexit 3\n')
        (bin_dir / name).chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    bash = shutil.which("bash") or "/bin/bash"
    p = subprocess.run([bash, str(example / "run.sh")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 3, p.stdout + p.stderr
    assert p.stdout.strip() == (
        f"kernelsmith optimize {example}/model.py:decode_step --out llama_decode_work --device cuda --budget 20m "
        f"--seeds {example}/seeds.py:seed_for --mode eager"
    )
    shutil.rmtree(tmp_path / ".venv")
    p = subprocess.run([bash, str(example / "run.sh")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stdout + p.stderr
    assert f"no kernelsmith on PATH nor in {tmp_path}/.venv: activate the project's venv" in p.stderr
