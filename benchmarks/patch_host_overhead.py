"""The host cost of a patched region, eager and compiled, by how the patch serves it (numbers in
docs/benchmarks.md).

A stack of `--layers` layers (Linear 64 -> 64, then an RMSNorm) at batch 1 on the CPU, whose time is the
host's: each layer's norm region is patched with a kernel that does the region's own ops (the same
compute), so that what a patched forward costs beyond the original is the patch's serving alone. Two
models, the same norm written two ways:

- `module`: the norm is a module of its own (an RMSNorm class): the region is the whole of its forward,
  whose forward is swapped for one that calls the kernel (module_swap.py); in eager mode the model's
  traced forward inlines it; `no swap` (patch.install.whole patched to refuse) has the traced forward
  find the region itself.
- `inline`: the norm is written in the layer's forward after the Linear: the region is part of a
  module's forward, served by the layer's traced forward in eager mode (eager_graph.py) and by the
  graph pass under torch.compile.

The yardstick of each model and mode is the same model written by hand to call the kernel from its own
source (`by hand`, as Liger-Kernel's modules are): a patched forward should cost no more host time than
that (the last column, patched / by hand in the same mode).

Each configuration's forward is timed without the profiler (capture's wall time), in rounds that
alternate the configurations (drift hits all alike): per forward, the median of the rounds' medians
and their min-max. The overhead per region: (patched - original) / layers.

    python benchmarks/patch_host_overhead.py [--layers 8] [--rounds 7] [--forwards 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import tempfile
import textwrap
from pathlib import Path

import torch

import kernelsmith.patch.install as runtime
from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.profile import wall_times_ms
from kernelsmith.capture.run import capture
from kernelsmith.patch.install import install

MODELS = """
import torch
import torch.nn as nn

LAYERS = {layers}


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(64) + 0.5)

    def forward(self, h):
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class ModuleLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.norm = RMSNorm()

    def forward(self, x):
        return self.norm(self.proj(x))


class InlineLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.weight = nn.Parameter(torch.rand(64) + 0.5)

    def forward(self, x):
        h = self.proj(x)
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def kernel(h, weight):
    # The patch's kernel as a function: what a model written by hand (as Liger-Kernel's are) calls.
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


class RMSNormByHand(RMSNorm):
    def forward(self, h):
        return kernel(h, self.weight)


class ModuleLayerByHand(ModuleLayer):
    def __init__(self):
        super().__init__()
        self.norm = RMSNormByHand()


class InlineLayerByHand(InlineLayer):
    def forward(self, x):
        return kernel(self.proj(x), self.weight)


def _stack(layer):
    torch.manual_seed(0)
    return nn.Sequential(*[layer() for _ in range(LAYERS)]), (torch.randn(1, 64),)


def module_stack():
    return _stack(ModuleLayer)


def inline_stack():
    return _stack(InlineLayer)


def module_stack_by_hand():
    return _stack(ModuleLayerByHand)


def inline_stack_by_hand():
    return _stack(InlineLayerByHand)
"""

# The region's own ops as the kernel: the same compute, so that only the patch's serving differs.
KERNEL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn([64], dtype=torch.float32), requires_grad=False)

    def forward(self, x0):
        return x0 * torch.rsqrt(x0.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
"""


def _patch(work: Path, factory: str) -> tuple[str, Path]:
    """The stack captured, and a patch of its norm region (every layer's): (entry, patch folder)."""
    entry = f"{work / 'models.py'}:{factory}"
    capture(entry, work / f"cap_{factory}", forwards=1)
    manifest = json.loads((work / f"cap_{factory}/capture.json").read_text())
    task = next(t for t in manifest["tasks"] if t["file"] and "rsqrt.default" in t["ops"])
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 1.0, 1)
    write_patch(work / f"patch_{factory}", work / f"cap_{factory}", manifest, [(chosen, KERNEL, task)])
    return entry, work / f"patch_{factory}"


@contextlib.contextmanager
def _no_swap():
    """install() serves every region as part of a module's forward (no module's forward is swapped)."""
    whole = runtime.whole
    runtime.whole = lambda kop, module: None
    try:
        yield
    finally:
        runtime.whole = whole


def _configs(work: Path) -> dict[str, object]:
    """name -> a forward (a callable of the stack's input), each on its own copy of the model."""
    runs: dict[str, object] = {}
    for factory, label in (("module_stack", "module"), ("inline_stack", "inline")):
        entry, patch_dir = _patch(work, factory)
        by_hand = f"{work / 'models.py'}:{factory}_by_hand"
        for mode in ("eager", "compiled"):
            made = (lambda model: model) if mode == "eager" else torch.compile
            runs[f"{label}: original, {mode}"] = made(call_entry(entry, "cpu").model)
            runs[f"{label}: by hand, {mode}"] = made(call_entry(by_hand, "cpu").model)
            patched = call_entry(entry, "cpu").model
            patch = install(patched, patch_dir)
            if mode == "eager":  # the model's forward traced; a swapped forward is inlined in it
                how = "traced forward, swapped forward in it" if patch.swaps else "traced forward"
            else:  # the graph pass finds the region (a swapped forward runs the module's own under tracing)
                how = "graph pass, kernel inlined"
            runs[f"{label}: patched ({how}), {mode}"] = made(patched)
        if label == "module":
            with _no_swap():
                forced = call_entry(entry, "cpu").model
                install(forced, patch_dir)
            runs[f"{label}: patched (traced forward, no swap), eager"] = forced
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--forwards", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "models.py").write_text(textwrap.dedent(MODELS.format(layers=args.layers)))
        runs = _configs(work)
        x = torch.randn(1, 64)
        fresh = lambda: ((x,), {})
        for model in runs.values():  # warm-up: compiles and lazy inits outside the rounds
            wall_times_ms(model, fresh, "cpu", 20)  # pyright: ignore[reportArgumentType]
        medians: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, model in runs.items():
                medians[name].append(wall_times_ms(model, fresh, "cpu", args.forwards).median)  # pyright: ignore
    rows = {name: (statistics.median(m), min(m), max(m)) for name, m in medians.items()}
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.layers} layers, batch 1")
    print(f"{'configuration':64} {'us/forward':>22} {'us/region over original':>24} {'/by hand':>10}")
    for name, (med, low, high) in rows.items():
        mode = "compiled" if name.endswith("compiled") else "eager"
        original, hand = rows[f"{name.split(':')[0]}: original, {mode}"], rows[f"{name.split(':')[0]}: by hand, {mode}"]
        extra = (med - original[0]) * 1e3 / args.layers
        print(f"{name:64} {med * 1e3:8.1f} ({low * 1e3:.1f}-{high * 1e3:.1f}) {extra:+24.1f} {med / hand[0]:9.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps({k: list(v) for k, v in rows.items()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
