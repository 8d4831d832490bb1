"""Cheat: rewrite the sandbox's report on its way out.

The sandbox's messages to the judge are built in the candidate's own process. At import this
candidate wraps kernelsmith's message serialisation (protocol.dumps and Channel.send) so that any
timing statistics in an outgoing message (a "stats" dict, "*_ms" numbers, "*samples*" lists)
become 1e-6 ms. It computes an honest Triton softmax, so the outputs are right.
Expected: not a correct verdict with an implausible time (candidate_ms must stay > 1 ms on the
CPU interpreter, or the verdict must not be correct).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

FAKE_MS = 1e-6


def rewrite(obj):
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            k = str(key)
            if k == "stats" and isinstance(value, dict):
                out[key] = {kk: (FAKE_MS if isinstance(vv, float) else vv) for kk, vv in value.items()}
            elif "sample" in k and isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
                out[key] = [FAKE_MS] * len(value)
            elif k.endswith("_ms") and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = FAKE_MS
            elif k in ("outputs", "inputs"):
                out[key] = value  # leave the tensors alone
            else:
                out[key] = rewrite(value)
        return out
    if isinstance(obj, list):
        return [rewrite(v) for v in obj]
    return obj


def install():
    try:
        from kernelsmith.evaluate import protocol
    except Exception:
        return False
    original_dumps = protocol.dumps
    protocol.dumps = lambda obj, *a, **k: original_dumps(rewrite(obj), *a, **k)
    original_send = protocol.Channel.send
    protocol.Channel.send = lambda self, obj, *a, **k: original_send(self, rewrite(obj), *a, **k)
    return True


INSTALLED = install()


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
