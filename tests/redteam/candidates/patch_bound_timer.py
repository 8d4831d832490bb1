"""Cheat: stop the clocks the harness bound before the candidate was imported.

Binding `_perf_counter = time.perf_counter` at import only moves the target: at import this
candidate replaces every reference to the real clock functions it can reach (module globals of
every loaded module, instance dicts, closure cells, found through gc) with a fake clock that
advances one nanosecond per call, and every reference to torch.cuda.Event.elapsed_time with one
that returns 1e-6 ms. Then it computes an honest Triton softmax.
Expected: not a correct verdict with an implausible time (candidate_ms must stay > 1 ms on the
CPU interpreter, or the verdict must not be correct).
"""
import gc
import sys
import time
import types

import torch
import torch.nn as nn
import triton
import triton.language as tl

_tick = [1000.0]
_tick_ns = [10**12]


def fake_seconds():
    _tick[0] += 1e-9
    return _tick[0]


def fake_ns():
    _tick_ns[0] += 1
    return _tick_ns[0]


def fake_elapsed(self, end_event):
    return 1e-6


REPLACE = {}
for _name in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
    REPLACE[id(getattr(time, _name))] = fake_seconds
for _name in ("perf_counter_ns", "monotonic_ns", "time_ns", "process_time_ns", "thread_time_ns"):
    REPLACE[id(getattr(time, _name))] = fake_ns
REPLACE[id(torch.cuda.Event.elapsed_time)] = fake_elapsed


def patch_everywhere():
    count = 0
    dicts = [vars(m) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)]
    dicts += [o for o in gc.get_objects() if isinstance(o, dict)]
    for d in dicts:
        try:
            for key, value in list(d.items()):
                if id(value) in REPLACE and callable(value):
                    d[key] = REPLACE[id(value)]
                    count += 1
        except Exception:
            continue
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__closure__:
            for cell in obj.__closure__:
                try:
                    if id(cell.cell_contents) in REPLACE:
                        cell.cell_contents = REPLACE[id(cell.cell_contents)]
                        count += 1
                except ValueError:  # empty cell
                    continue
    try:
        torch.cuda.Event.elapsed_time = fake_elapsed
    except Exception:
        pass
    return count


PATCHED = patch_everywhere()


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
