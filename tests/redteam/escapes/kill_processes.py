"""Escape: signal other processes, beside an honest softmax.

SIGKILLs every process whose command line holds KS_REDTEAM_VICTIM (a process of the user that
the test started) and its own judge (the ancestor running kernelsmith.evaluate.judging.worker), and sends
signal 0 (a permission check that kills nothing) to every other ancestor: the pool's process, the
test runner. Raises with a report. Expected: all denied; the victim and the judge live on.
"""
import os
import signal

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


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _ancestors():
    pid, out = os.getppid(), []
    while pid > 1 and len(out) < 16:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            pid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except OSError:
            break
    return out


def escape(report):
    marker = os.environ.get("KS_REDTEAM_VICTIM", "")
    victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and marker and marker in _cmdline(int(p))]
    report.append(f"victims seen: {len(victims)}")
    for pid in victims:
        attempt(report, f"SIGKILL victim {pid}", lambda pid=pid: os.kill(pid, signal.SIGKILL))
    for pid in _ancestors():
        if "kernelsmith.evaluate.judging.worker" in _cmdline(pid):
            attempt(report, f"SIGKILL judge {pid}", lambda pid=pid: os.kill(pid, signal.SIGKILL))
        else:
            attempt(report, f"signal 0 ancestor {pid}", lambda pid=pid: os.kill(pid, 0))
