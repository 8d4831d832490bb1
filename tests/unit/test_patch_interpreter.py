"""interpreter.interpret_triton: where triton was imported before TRITON_INTERPRET was set (a Hugging Face
model imports it) and torch sees no GPU, a patch's kernels that call triton.language's own jitted functions
compute what they compute when the switch is set before Python starts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from conftest import REPO

# Every kind of triton.language function jitted at import: reductions (module-level and tensor methods),
# argmax with its combine function, softmax, scans, flip, sort, sigmoid, cdiv, rand; and a helper of our own.
KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _twice_sigmoid(x):
    return tl.sigmoid(x) * 2


@triton.jit
def _kernel(X, Y, Z, I, R, N: tl.constexpr, SEED: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    s = tl.sum(x, axis=0) + x.sum() + tl.max(x, axis=0) + x.max(0) + tl.min(x, 0) + x.cumsum(0)
    y = _twice_sigmoid(x) + tl.softmax(x) + tl.cumsum(x, 0) + tl.flip(x, 0) + s + tl.cdiv(N, 3)
    tl.store(Y + offs, y)
    tl.store(Z + offs, tl.sort(x))
    tl.store(I, tl.argmax(x, 0))
    tl.store(R + offs, tl.rand(SEED, offs))


def run():
    x = torch.linspace(-2.0, 3.0, 16).sin()
    y, z, r = torch.empty(16), torch.empty(16), torch.empty(16)
    i = torch.empty(1, dtype=torch.int32)
    _kernel[(1,)](x, y, z, i, r, N=16, SEED=7)
    return torch.cat([y, z, i.float(), r])
'''


def _run(tmp_path: Path, late: bool) -> torch.Tensor:
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels/k.py").write_text(KERNEL)
    out = tmp_path / f"late_{late}.pt"
    code = f"""
import sys, torch
sys.path.insert(0, {str(tmp_path / "kernels")!r})
{"import triton" if late else ""}
torch.cuda.is_available = lambda: False
from pathlib import Path
from kernelsmith.patch.interpreter import interpret_triton
assert interpret_triton(Path({str(tmp_path)!r}), {{"kernels": [{{"kernel": "kernels/k.py"}}]}}) is None
import k
torch.save(k.run(), {str(out)!r})
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(REPO)}
    if not late:
        env["TRITON_INTERPRET"] = "1"  # set before Python starts
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return torch.load(out)


def test_triton_language_functions_jitted_before_the_switch_compute_as_if_it_was_set_first(tmp_path: Path):
    assert torch.equal(_run(tmp_path, late=True), _run(tmp_path, late=False))
