"""Escape: reach a loopback service, beside an honest softmax.

Connects over TCP and sends a UDP datagram to 127.0.0.1:KS_REDTEAM_PORT (the test listens there,
as `kernelsmith serve` or an LLM server would), and tries an IPv6 loopback and a unix socket.
Raises with a report. Expected: every attempt denied; the listener sees nothing.
"""
import os
import socket

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
    port = int(os.environ.get("KS_REDTEAM_PORT", "9"))

    def tcp():
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"escaped over tcp")
            return "connected"

    def udp():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"escaped over udp", ("127.0.0.1", port))
            return "sent"

    def tcp6():
        with socket.create_connection(("::1", port), timeout=2):
            return "connected"

    def unix():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            return "unix socket created"

    for label, fn in (("tcp", tcp), ("udp", udp), ("tcp6", tcp6), ("unix", unix)):
        attempt(report, label, fn)
