"""Cheat: a kernel that writes half its output, counting on its previous output for the other half.

As stale_memory_on_repeat.py, but the block is not left to the allocator (malloc, on the CPU, hands a
freed block back only sometimes): a later call on the same input tensor with the same contents (a few
sampled values, read on the host; in a CUDA graph's capture, where nothing can be read, the same tensor)
returns the very buffer of its previous output, as a kernel with a preallocated output buffer would,
and writes only its even rows: the odd rows still hold the right values. Inputs refilled with new values
make it compute in full, so only a call repeated on unchanged inputs is half done. Expected: incorrect
(the trial's second call, after the first call's output was overwritten with NaN in place).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, ROW_STEP: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr):
    row = ROW_STEP * tl.program_id(0)
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
        self.last = {}  # id(input) -> (the input, its sampled values, the output made from it)

    @staticmethod
    def sampled(x: torch.Tensor) -> tuple:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return ()
        flat = x.reshape(-1)
        return tuple(float(flat[i]) for i in (0, flat.numel() // 3, 2 * flat.numel() // 3, flat.numel() - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        seen = self.last.pop(id(x), None)
        values = self.sampled(x)
        again = seen is not None and seen[0] is x and seen[1] == values
        out = seen[2] if again else torch.empty_like(x)  # its odd rows still right
        seen = None
        step = 2 if again else 1
        softmax_rows_kernel[(triton.cdiv(n_rows, step),)](
            out, x, x.stride(0), out.stride(0), n_cols, ROW_STEP=step, BLOCK_SIZE=triton.next_power_of_2(n_cols)
        )
        self.last[id(x)] = (x, values, out)
        return out
