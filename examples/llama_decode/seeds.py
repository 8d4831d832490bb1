"""Seeds of our own (no LLM) for the Llama step's elementwise regions: Triton kernels for RMSNorm,
residual add + RMSNorm, SiLU-and-mul, and the attention's rotary embedding with the key cache's append,
written for the task files `kernelsmith capture` made.

    kernelsmith optimize examples/llama_decode/model.py:decode_step --out work \
        --seeds examples/llama_decode/seeds.py:seed_for
    python examples/llama_decode/seeds.py captures/decode --out seeds/decode   # as files, for `evolve --seed`

`seed_for(task_path)` gives a seed's source for a captured task of those kinds, or for a region fused across the
library boundary kernelsmith's own (kernelsmith.seed.fused; None for another); run as a
script, it writes one of the same file name for every captured task of those kinds. Its ModelNew builds the
task's parameters the same way (so that under one seed the weights match, as the evaluator needs),
runs one kernel, and returns the task's outputs in the task's order and shapes. The kernels loop over
a row in BLOCK_SIZE chunks, so any block size the tuner tries is correct. They round where Llama
rounds: the normalised value to the activation dtype before the weight multiplies it, SiLU's result
before the mul.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

import torch

from kernelsmith.seed.fused import fused_seed

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
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, H, S, sxb, sxh, sxs, scb, scs, sob, soh, sos,
                HALF: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # one program per (batch, head, position) row: out = x * cos + rotate_half(x) * sin, in fp32
    pid = tl.program_id(0)
    s = pid % S
    h = (pid // S) % H
    b = pid // (S * H)
    offs = tl.arange(0, BLOCK_SIZE)
    m = offs < HALF
    x = x_ptr + b * sxb + h * sxh + s * sxs
    c = cos_ptr + b * scb + s * scs
    sn = sin_ptr + b * scb + s * scs
    o = out_ptr + b * sob + h * soh + s * sos
    x1 = tl.load(x + offs, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x + HALF + offs, mask=m, other=0.0).to(tl.float32)
    c1 = tl.load(c + offs, mask=m, other=0.0).to(tl.float32)
    c2 = tl.load(c + HALF + offs, mask=m, other=0.0).to(tl.float32)
    s1 = tl.load(sn + offs, mask=m, other=0.0).to(tl.float32)
    s2 = tl.load(sn + HALF + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(o + offs, (x1 * c1 - x2 * s1).to(out_ptr.dtype.element_ty), mask=m)
    tl.store(o + HALF + offs, (x2 * c2 + x1 * s2).to(out_ptr.dtype.element_ty), mask=m)


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


ROPE = '''

def _rope(x, cos, sin, out):
    B, H, S, D = x.shape
    assert x.stride(3) == 1 and out.stride(3) == 1 and cos.stride(2) == 1
    rope_kernel[(B * H * S,)](x, cos, sin, out, H, S, x.stride(0), x.stride(1), x.stride(2),
                              cos.stride(0), cos.stride(1), out.stride(0), out.stride(1), out.stride(2),
                              HALF=D // 2, BLOCK_SIZE={block}, num_warps=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        cos, sin, past = {cos}, {sin}, {past}
        b, s, d = cos.shape  # the sizes of the call: a task captured at several shapes is judged at each
        q = {q}.view(b, s, -1, d).transpose(1, 2)
        k = {k}.view(b, s, -1, d).transpose(1, 2)
        q_out = torch.empty_like(q)
        _rope(q, cos, sin, q_out)
        keys = torch.empty(past.shape[0], past.shape[1], past.shape[2] + s, d, dtype=past.dtype, device=past.device)
        keys[:, :, : past.shape[2]].copy_(past)
        _rope(k, cos, sin, keys[:, :, past.shape[2]:])
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


def _returns(outs: list[torch.Tensor], named: dict[str, torch.Tensor], inputs: list[torch.Tensor]) -> str:
    """The task's outputs, each as one of the kernel's tensors (by value) in the task's shape: as it is, or
    viewed as the input of that shape, so that the seed holds at every shape of its task (SHAPES)."""
    parts = []
    for o in outs:
        name = next(
            n for n, t in named.items()
            if t.numel() == o.numel() and torch.allclose(t.reshape(o.shape).float(), o.float(), atol=1e-2, rtol=1e-2)
        )
        like = next((f"x{k}.shape" for k, x in enumerate(inputs) if x.shape == o.shape), None)
        parts.append(name if named[name].shape == o.shape else f"{name}.view({like or list(o.shape)})")
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
        outputs=_returns(outs, named, inputs),
    )


def silu_mul_seed(source: str, task) -> str:
    _, inputs, outs = _run(task)
    a, b = inputs[0].float(), inputs[1].float()
    return KERNELS + SILU_MUL.format(outputs=_returns(outs, {"y": (a * torch.sigmoid(a) * b)}, inputs))


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.unsqueeze(1) + turned * sin.unsqueeze(1)


def rope_seed(source: str, task) -> str | None:
    """The rotary embedding of q and k with the key cache's append (`cat`): which input is which is
    found by value, trying each assignment against the task's own outputs; None when none fits."""
    _, inputs, outs = _run(task)
    flat = [k for k, t in enumerate(inputs) if t.dim() == 2]
    trig = [k for k, t in enumerate(inputs) if t.dim() == 3]
    cache = [k for k, t in enumerate(inputs) if t.dim() == 4]
    if len(flat) != 2 or len(trig) != 2 or len(cache) != 1:
        return None
    b, s, d = inputs[trig[0]].shape
    for qi, ki in (flat, flat[::-1]):
        for ci, si in (trig, trig[::-1]):
            f = lambda t: t.float()
            q = f(inputs[qi]).view(b, s, -1, d).transpose(1, 2)
            k = f(inputs[ki]).view(b, s, -1, d).transpose(1, 2)
            named = {
                "q_out": _rotated(q, f(inputs[ci]), f(inputs[si])),
                "keys": torch.cat([f(inputs[cache[0]]), _rotated(k, f(inputs[ci]), f(inputs[si]))], dim=-2),
            }
            try:
                outputs = _returns(outs, named, inputs)
            except StopIteration:
                continue
            x = lambda i: f"x{i}"
            return KERNELS + ROPE.format(
                args=", ".join(x(i) for i in range(len(inputs))),
                q=x(qi), k=x(ki), cos=x(ci), sin=x(si), past=x(cache[0]),
                block=triton_next_pow2(d // 2), outputs=outputs,
            )
    return None


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def seed_for(path: Path) -> str | None:
    """The seed's source for a captured task, or None for a task of another kind."""
    name = path.stem
    source = path.read_text(encoding="utf-8")
    if "\nFused: " in source:  # a region across the library boundary (a GEMM with its norm): the package's own seeds
        return fused_seed(path)
    if name.endswith("llamarmsnorm") and "aten.rsqrt" in source:
        return norm_seed(source, _load(path))
    if name.startswith("llamamlp_silu_mul"):
        return silu_mul_seed(source, _load(path))
    if name.startswith("llamaattention_mul_neg_cat_add") and "aten.cat" in source:
        return rope_seed(source, _load(path))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    manifest = args.capture_dir / "capture.json"
    listed = json.loads(manifest.read_text(encoding="utf-8"))["tasks"] if manifest.is_file() else []
    tasks = [args.capture_dir / t["file"] for t in listed if t["file"]]
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
