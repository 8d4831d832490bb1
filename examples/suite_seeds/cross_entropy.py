"""Naive seed for cross_entropy: one program per token, one pass over its logits in BLOCK_SIZE chunks
with a running max and rescaled sum (online logsumexp), then loss = logsumexp - logit[target]."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr,
                         n_vocab,
                         logits_row_stride,
                         BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    logits_row = logits_ptr + row * logits_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    m = float("-inf")
    s = 0.0
    for start in range(0, n_vocab, BLOCK_SIZE):
        x = tl.load(logits_row + start + cols, mask=start + cols < n_vocab, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    target = tl.load(targets_ptr + row)
    x_target = tl.load(logits_row + target).to(tl.float32)
    loss = m + tl.log(s) - x_target
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = logits.contiguous(), targets.contiguous()
        n_tokens, n_vocab = logits.shape
        loss = torch.empty(n_tokens, dtype=logits.dtype, device=logits.device)
        BLOCK_SIZE = 1024
        cross_entropy_kernel[(n_tokens,)](logits, targets, loss, n_vocab, logits.stride(0),
                                          BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return loss
