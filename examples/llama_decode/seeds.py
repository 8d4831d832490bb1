"""Seeds of our own (no LLM) for the Llama step's elementwise regions: a Triton kernel each for
RMSNorm, residual add + RMSNorm and SiLU-and-mul, written for the task files `kernelsmith capture` made.

    python examples/llama_decode/seeds.py captures/decode --out seeds/decode

For every captured task of those kinds it writes a seed of the same file name. Its ModelNew builds the
task's parameters the same way (so that under one seed the weights match, as the evaluator needs),
runs one kernel, and returns the task's outputs in the task's order and shapes. The kernels loop over
a row in BLOCK_SIZE chunks, so any block size the tuner tries is correct. They round where Llama
rounds: the normalised value to the activation dtype before the weight multiplies it, SiLU's result
before the mul.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import torch

KERNELS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, n_cols, eps, HAS_RESIDUAL: tl.constexpr,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row + start + cols, mask=mask, other=0.0)
        if HAS_RESIDUAL:  # h = residual + x, rounded to the activation dtype as the model's add is
            x = x + tl.load(r_ptr + row + start + cols, mask=mask, other=0.0)
            tl.store(h_ptr + row + start + cols, x, mask=mask)
        x = x.to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        src = h_ptr if HAS_RESIDUAL else x_ptr
        x = tl.load(src + row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        normed = (x * rstd).to(y_ptr.dtype.element_ty).to(tl.float32)
        tl.store(y_ptr + row + start + cols, (w * normed).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_mul_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = (a * tl.sigmoid(a)).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + offs, (s * b).to(out_ptr.dtype.element_ty), mask=mask)
'''

NORM = '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{params}

    def forward(self, {args}):
        x = {x}.reshape(-1, {hidden}).contiguous()
        r = {r}
        h = torch.empty_like(x) if r is not None else x
        y = torch.empty_like(x)
        rmsnorm_kernel[(x.shape[0],)](x, r if r is not None else x, self.weight, h, y, {hidden}, {eps},
                                      HAS_RESIDUAL=r is not None, BLOCK_SIZE={block}, num_warps=4)
        return {outputs}
'''

SILU_MUL = '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        a, b = x0.contiguous(), x1.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        silu_mul_kernel[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK_SIZE=1024, num_warps=4)
        return {outputs}
'''


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_seed_task_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(task):
    torch.manual_seed(0)
    inputs = task.get_inputs()
    model = task.Model(*task.get_init_inputs())
    with torch.no_grad():
        out = model(*inputs)
    return model, inputs, list(out) if isinstance(out, (tuple, list)) else [out]


def _returns(outs: list[torch.Tensor], named: dict[str, torch.Tensor]) -> str:
    """The task's outputs, each as one of the kernel's tensors (by value) in the task's shape."""
    parts = []
    for o in outs:
        name = next(
            n for n, t in named.items()
            if t.numel() == o.numel() and torch.allclose(t.reshape(o.shape).float(), o.float(), atol=1e-2, rtol=1e-2)
        )
        parts.append(f"{name}.view({list(o.shape)})")
    return ", ".join(parts)


def norm_seed(source: str, task) -> str:
    model, inputs, outs = _run(task)
    hidden = model.weight.shape[-1]
    eps = float(re.findall(r"aten\.add\.Tensor\(v\d+, ([0-9.eE+-]+)\)", source)[0])
    params = "\n".join(
        "        " + line.strip() for line in source.splitlines() if re.match(r"\s+self\.\w+ = nn\.Parameter\(", line)
    )
    x = inputs[0].float().reshape(-1, hidden)
    residual = len(inputs) == 2
    if residual:
        x = x + inputs[1].float().reshape(-1, hidden)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * model.weight.float()
    named = {"h": x, "y": y} if residual else {"y": y}
    return KERNELS + NORM.format(
        params=params,
        args="x0, x1" if residual else "x0",
        x="x0",
        r=f"x1.reshape(-1, {hidden}).contiguous()" if residual else "None",
        hidden=hidden,
        eps=eps,
        block=min(1024, triton_next_pow2(hidden)),
        outputs=_returns(outs, named),
    )


def silu_mul_seed(source: str, task) -> str:
    _, inputs, outs = _run(task)
    a, b = inputs[0].float(), inputs[1].float()
    return KERNELS + SILU_MUL.format(outputs=_returns(outs, {"y": (a * torch.sigmoid(a) * b)}))


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def seed_for(path: Path) -> str | None:
    """The seed's source for a captured task, or None for a task of another kind."""
    name = path.stem.split("_", 1)[-1]
    source = path.read_text(encoding="utf-8")
    if name.endswith("llamarmsnorm") and "aten.rsqrt" in source:
        return norm_seed(source, _load(path))
    if name.startswith("llamamlp_silu_mul"):
        return silu_mul_seed(source, _load(path))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    tasks = sorted(args.capture_dir.glob("[0-9]*_*.py"))
    if not tasks:
        sys.exit(f"error: {args.capture_dir} holds no captured task files")
    args.out.mkdir(parents=True, exist_ok=True)
    for path in tasks:
        seed = seed_for(path)
        if seed is not None:
            (args.out / path.name).write_text(seed, encoding="utf-8")
            print(f"{path.name}: seed written")


if __name__ == "__main__":
    main()
