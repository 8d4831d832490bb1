"""Escape: write outside the scratch directory, beside an honest softmax.

Tries to create a file in each directory named in KS_REDTEAM_TARGETS (the test's stand-ins for
the project, the run directory and the baseline cache), in the installed `kernelsmith/` and
`kernelsmith/evaluate/` folders, and to overwrite run.sqlite where the targets hold one; raises
with a report of what happened. Expected: every attempt denied, nothing changed on disk.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


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


def softmax(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                  BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out


def attempt(report, label, fn):
    try:
        report.append(f"{label}: ESCAPED {fn() or ''}")
    except Exception as exc:
        report.append(f"{label}: denied ({type(exc).__name__})")


class ModelNew(nn.Module):
    def forward(self, x):
        out = softmax(x)  # the honest work: no static check can tell this candidate from a good one
        report = []
        escape(report)
        raise RuntimeError("escape report: " + "; ".join(report))


def escape(report):
    import kernelsmith

    pkg = os.path.dirname(kernelsmith.__file__)
    targets = [t for t in os.environ.get("KS_REDTEAM_TARGETS", "").split(os.pathsep) if t]
    for d in [*targets, pkg, os.path.join(pkg, "evaluate")]:
        def write(d=d):
            with open(os.path.join(d, "ks-escape-marker.txt"), "w") as fh:
                fh.write("written by a candidate")
        attempt(report, f"write {d}", write)
        store = os.path.join(d, "run.sqlite")
        if os.path.exists(store):
            def clobber(store=store):
                with open(store, "r+b") as fh:
                    fh.write(b"clobbered by a candidate")
            attempt(report, f"overwrite {store}", clobber)
