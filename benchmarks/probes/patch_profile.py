"""Probe (CUDA): where a patched forward's device time goes, kernel by kernel, beside the model's own.

Captures ENTRY, patches it with the Llama example's own seeds (examples/llama_decode/seeds.py, no
search, no judge: the kernels as written), and profiles 10 forwards of each model in eager mode, then
prints both kernel tables (device time per forward) and what the patch took. Written for the Llama
step's eager check on an H100 (2026-12-06), whose device time moved 1.01x where the kernels' verdicts
predicted 1.11x: which kernels the patched forward runs that the prediction does not expect.

The same profile is then taken with a patch that leaves out the kernels whose regions need the
model's top-level forward traced (a cover of depth <= 1: '' or 'model'): TorchDynamo runs library code
down its compiling branches (transformers builds an explicit attention mask there), which the first
H100 profile suggested costs more than those kernels save.

`--kernels inductor` patches any model with `kernelsmith seed`'s kernels (Inductor's Triton code, what
`optimize` starts from), `--kernels models` with each task's own Model (the model's ops, each region in one
call: what the patch's plumbing costs alone), `--only` the named tasks. Issue 54 (a ViT 2x slower in eager
mode on an H100, its regions the layers' add + norm and the pooler's tanh, seeds as kernels):

    python benchmarks/probes/patch_profile.py benchmarks/device/models/transformers_models.py:vit \
        --kernels inductor --only vitmodel_vitlayer,vitmodel_vitlayer_native_layer_norm,tanh

    python benchmarks/probes/patch_profile.py [ENTRY] [--out DIR] [--kernels llama|inductor|models] [--only A,B]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a dry run of the plumbing
ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "examples/llama_decode")]


def table(model, made, reps: int = 10) -> tuple[float, list[tuple[str, float, float]]]:
    """(device ms per forward, [(kernel, ms per forward, calls per forward)]) over `reps` forwards."""
    with torch.no_grad():
        for _ in range(3):
            model(*made.args, **copy.deepcopy(made.kwargs))
        torch.cuda.synchronize() if DEV == 'cuda' else None
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA if DEV == 'cuda' else torch.profiler.ProfilerActivity.CPU]
        ) as prof:
            for _ in range(reps):
                model(*made.args, **copy.deepcopy(made.kwargs))
            torch.cuda.synchronize() if DEV == 'cuda' else None
    rows: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA or (DEV == 'cpu' and e.name.startswith('aten::')):
            r = rows.setdefault(e.name[:90], [0.0, 0.0])
            r[0] += (e.device_time if DEV == 'cuda' else e.cpu_time) / 1e3 / reps
            r[1] += 1 / reps
    listed = sorted(((k, v[0], v[1]) for k, v in rows.items()), key=lambda r: -r[1])
    return sum(r[1] for r in listed), listed


def as_apply_reads(model, made, patch, reps: int = 5) -> tuple[float, dict[str, str]]:
    """The forward's device time and each kernel's as apply reads them (forward_time.profiled_ms: the
    device time the profiler links to a CPU range), the median of `reps`: beside the kernels' sum
    above, it says whether kernels launched outside aten (Triton's) count in apply's figure (its
    per-kernel ranges read 0.0 ms for the Triton seeds on the H100, 2026-12-06)."""
    from statistics import median

    from kernelsmith.apply.forward_time import profiled_ms

    totals: list[float] = []
    per: dict[str, list[float]] = {}
    with torch.no_grad():
        for _ in range(reps):
            kw = copy.deepcopy(made.kwargs)
            total, kernels = profiled_ms(lambda kw=kw: model(*made.args, **kw), DEV, patch)
            totals.append(total)
            for k, ms in kernels.items():
                per.setdefault(k, []).append(ms)
    return median(totals), {k: f"{median(v) * 1e3:.1f} us" for k, v in per.items()}


def kernel_source(path: Path, how: str) -> str | None:
    """A kernel for the captured task at `path`: the Llama example's seed, `kernelsmith seed`'s, or the task's
    own Model (None: none of that kind)."""
    if how == "models":
        return path.read_text(encoding="utf-8") + "\n\nModelNew = Model\n"
    if how == "inductor":
        from kernelsmith.errors import UserError
        from kernelsmith.seed.seed import seed_task
        from kernelsmith.task import Task

        try:
            return seed_task(Task.from_file(path)).source
        except UserError as exc:
            print(f"{path.stem}: no seed ({exc})")
            return None
    from seeds import seed_for

    return seed_for(path)


def main() -> int:
    from kernelsmith.apply.patch_dir import Chosen, write_patch
    from kernelsmith.capture.entry import call_entry
    from kernelsmith.capture.run import capture
    from kernelsmith.patch.install import install

    ap = argparse.ArgumentParser()
    ap.add_argument("entry", nargs="?", default=str(ROOT / "examples/llama_decode/model.py:decode_step"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/patch_profile"))
    ap.add_argument("--kernels", choices=["llama", "inductor", "models"], default="llama")
    ap.add_argument("--only", default="", help="comma-separated task names (default: every task)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    cap = args.out / "capture"
    capture(args.entry, cap, device=DEV, forwards=3)
    manifest = json.loads((cap / "capture.json").read_text())
    kept = []
    for task in manifest["tasks"]:
        if not task["file"] or (only and task["name"] not in only):
            continue
        source = kernel_source(cap / task["file"], args.kernels)
        if source:
            chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 1.0, 1)
            kept.append((chosen, source, task))
    shallow = {c.name for c, _, t in kept if any(cover.count(".") < 1 for cover in t.get("covers") or [""])}
    made = call_entry(args.entry, DEV)
    twin = copy.deepcopy(made.model)
    for variant, picks in (
        ("all seeds", kept),
        (f"without {sorted(shallow)}", [k for k in kept if k[0].name not in shallow]),
    ):
        if not picks:
            continue
        out = args.out / f"patch{len(variant)}"
        write_patch(out, cap, manifest, picks)
        model = copy.deepcopy(twin)
        patch = install(model, out)
        print(f"\n# {variant}")
        for name, m in (("model", twin), ("patched", model), ("model again", twin), ("patched again", model)):
            total, rows = table(m, made)
            read, kernels = as_apply_reads(m, made, patch if m is model else None)
            print(f"\n## {name}: {total * 1e3:.1f} us of kernels per forward (every kernel the profiler saw)")
            print(
                f"as apply reads it (the forward range's device time): {read * 1e3:.1f} us; its kernels' ranges: {kernels}"
            )
            for k, ms, calls in rows[:40]:
                print(f"{ms * 1e3:9.2f} us {calls:5.1f}x  {k}")
        print("\ntaken (all profiled forwards):", {k: c.fired for k, c in patch.counts.items()})
        for name in patch.counts:
            print(f"{name}: {patch.served(name)}")
        patch.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
