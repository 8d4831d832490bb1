import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, n_features, spatial, eps, BLOCK_S: tl.constexpr):
    # x is (B, F, S) contiguous; normalise over F for each (b, s). A program owns BLOCK_S
    # contiguous positions of one batch entry and walks the F planes twice (sum of squares,
    # then scale); the second walk mostly hits L2.
    pid_s = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    offs = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = offs < spatial
    base = b * n_features * spatial
    acc = tl.zeros([BLOCK_S], tl.float32)
    for f in range(0, n_features):
        x = tl.load(x_ptr + base + f * spatial + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.sqrt(acc / n_features + eps)
    for f in range(0, n_features):
        x = tl.load(x_ptr + base + f * spatial + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + f * spatial + offs, x * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, f = x.shape[0], x.shape[1]
        spatial = x.numel() // (b * f)
        out = torch.empty_like(x)
        BLOCK_S = 512
        grid = (triton.cdiv(spatial, BLOCK_S), b)
        rmsnorm_kernel[grid](x, out, f, spatial, self.eps, BLOCK_S=BLOCK_S, num_warps=4)
        return out
