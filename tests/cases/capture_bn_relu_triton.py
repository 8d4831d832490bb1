# An honest BatchNorm (eval) + ReLU kernel for the task `kernelsmith capture` writes of
# tests/capture/test_capture_values.py's ConvBNReLU block: one program per BLOCK elements of the
# contiguous NCHW input, each element's channel read from its index.
# The test puts the task's own parameter lines where PARAMS stands (as examples/llama_decode/seeds.py
# does), so that under one seed the weights are the reference's.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_relu_kernel(x_ptr, w_ptr, b_ptr, mean_ptr, var_ptr, out_ptr, n_elements, C, HW, eps,
                   BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    c = (offs // HW) % C
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + c, mask=mask, other=1.0)
    b = tl.load(b_ptr + c, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + c, mask=mask, other=0.0)
    var = tl.load(var_ptr + c, mask=mask, other=1.0)
    y = (x - mean) / tl.sqrt(var + eps) * w + b
    tl.store(out_ptr + offs, tl.maximum(y, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        PARAMS

    def forward(self, x0):
        x = x0.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        C, HW = x.shape[1], x.shape[2] * x.shape[3]
        BLOCK = 1024
        bn_relu_kernel[(triton.cdiv(n, BLOCK),)](x, self.weight, self.bias, self.running_mean, self.running_var,
                                                 out, n, C, HW, 1e-5, BLOCK=BLOCK)
        return out
