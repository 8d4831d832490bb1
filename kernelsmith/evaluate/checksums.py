"""Checksums: every call of a judge-timed batch reports one number per output tensor, a weighted sum
with weights the judge draws after the batch is armed, so that no call can skip its work unseen
(kernelsmith.evaluate.measuring.judge_clock, graph_batch)."""

from __future__ import annotations

import math

import torch

# A weighted sum with random weights in [-1, 1] needs the whole output (it cannot be had from a few
# elements), costs one read of it, and an honest result differs from the reference's by about
# ||got - ref|| / sqrt(3), whatever the sign of the errors.
CHECKSUM_SIGMAS = 20.0  # how far beyond the error the trials showed an honest checksum may land
CHECKSUM_ROUNDING = 1e-5  # float32 accumulation, relative to sum(|ref| * |w|)


def summed(leaf) -> bool:
    """Whether a leaf gets a checksum: a tensor with elements, in memory that can be read (not `meta`:
    the judge says where such an output lived, judging/leaves.py)."""
    return isinstance(leaf, torch.Tensor) and leaf.numel() > 0 and leaf.device.type in ("cpu", "cuda")


def checksum_weights(leaves: list, seed: int) -> list:
    """Weights in [-1, 1], one flat float32 tensor per summed leaf (None for other leaves); the same
    seed gives the same weights in the judge and the sandbox."""
    out = []
    for i, leaf in enumerate(leaves):
        if summed(leaf):
            g = torch.Generator(device=leaf.device)
            g.manual_seed(seed + i)
            n = leaf.numel() * (2 if leaf.is_complex() else 1)
            out.append(torch.rand(n, generator=g, device=leaf.device, dtype=torch.float32) * 2 - 1)
        else:
            out.append(None)
    return out


def flat32(leaf: torch.Tensor) -> torch.Tensor:
    x = torch.view_as_real(leaf) if leaf.is_complex() else leaf
    return x.reshape(-1).to(torch.float32)


def weighted_checksums(leaves: list, weights: list) -> list:
    """One 0-d tensor per weighted leaf (left on the device: no sync)."""
    if len(leaves) != len(weights):
        raise ValueError(f"forward returned {len(leaves)} outputs, earlier {len(weights)}")
    return [torch.dot(flat32(leaf), w) for leaf, w in zip(leaves, weights) if w is not None]


def checksum_mismatch(ref_leaves: list, weights: list, got: list, err_l2: list[float] | None) -> str | None:
    """None when the sandbox's checksums agree with the reference's; else what differs."""
    refs = [(i, r, w) for i, (r, w) in enumerate(zip(ref_leaves, weights)) if w is not None]
    if len(got) != len(refs):
        return f"{len(got)} checksums for {len(refs)} output tensors"
    for (i, r, w), value in zip(refs, got):
        flat = flat32(r)
        expect = float(torch.dot(flat, w))
        if not math.isfinite(expect):
            continue  # the reference itself has inf/NaN: the full check of other calls covers it
        scale = float(torch.dot(flat.abs(), w.abs()))
        err = err_l2[i] if err_l2 and i < len(err_l2) else 0.0
        limit = CHECKSUM_SIGMAS * err / math.sqrt(3.0) + CHECKSUM_ROUNDING * scale + 1e-30
        if not (isinstance(value, float) and abs(value - expect) <= limit):
            return f"output {i}: checksum {value!r}, the reference's {expect:.6g} (allowed difference {limit:.3g})"
    return None
