"""What a sandbox sends back, against the reference: its output and input leaves decoded, where and how
each tensor lived (device, layout, dtype, shape) checked before its values, and each placed on its
reference's device to be compared there.

A CUDA sandbox's tensors reach the judge as CUDA IPC handles, except an empty one (it has no memory to
share), which travels as CPU bytes: decoded, it sits on the CPU while the reference's sits on the GPU,
and torch refuses to compare the two. GPT-2's attention task, whose empty past keys are an input, ended
a whole `optimize` that way (issue 54). So every tensor message carries the facts of the tensor it was
(protocol.tensor_facts): a tensor that lived on another device, or in another layout, dtype or shape,
than the reference's is `incorrect` and said so; one that lived where the reference's does is compared
there, wherever its bytes travelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelsmith.evaluate.protocol import ProtocolError, decode_tensor


@dataclass(frozen=True)
class Facts:
    """Where and how a tensor lived: device ("cuda:0"), layout ("strided"), dtype ("float32"), shape."""

    device: str
    layout: str
    dtype: str
    shape: tuple[int, ...]

    @classmethod
    def of(cls, t: torch.Tensor) -> Facts:
        return cls(str(t.device), _name(t.layout), _name(t.dtype), tuple(t.shape))

    @classmethod
    def sent(cls, item: dict) -> Facts:
        """From a tensor message (protocol.encode_tensor); one without `on` lived where its kind says."""
        kind = item.get("kind")
        try:
            default = f"cuda:{int(item.get('device', 0))}" if kind == "cuda" else "cpu"
            return cls(
                str(item.get("on", default))[:40],
                str(item.get("layout", "strided"))[:40],
                str(item["dtype"])[:40],
                tuple(int(s) for s in item["shape"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed tensor message: {type(exc).__name__}: {exc}") from None


def _name(x) -> str:
    return str(x).removeprefix("torch.")


def label(i: int, n: int) -> str:
    """How a comparison names output `i` of `n` (checks.compare_outputs names them alike)."""
    return "output" if n == 1 else f"output {i}"


def decode_leaves(items) -> tuple[list, list[Facts | None]]:
    """Each leaf of a sandbox's message: a number or None as it is, a tensor rebuilt (None where only
    its facts were sent), and the facts of each tensor (None for the other leaves)."""
    if not isinstance(items, list):
        raise ProtocolError("the leaves of a message are not a list")
    values: list = []
    facts: list[Facts | None] = []
    for item in items:
        if not isinstance(item, dict):
            raise ProtocolError("output leaf is not a message")
        if item.get("kind") == "value":
            values.append(item.get("value"))
            facts.append(None)
            continue
        facts.append(Facts.sent(item))
        values.append(None if item.get("kind") == "facts" else decode_tensor(item))
    return values, facts


def differs(ref: Facts, got: Facts, name: str) -> str | None:
    """None when `got` lived as `ref` does; else which fact differs, first the device. Shape and dtype
    are said as checks.compare_tensor says them (fib.trace_out reads the words)."""
    if got.device != ref.device:
        return f"{name} is on {got.device}, the reference's on {ref.device}"
    if got.layout != ref.layout:
        return f"{name} has layout {got.layout}, the reference's {ref.layout}"
    if got.shape != ref.shape:
        return f"{name}: shape {got.shape} but expected {ref.shape}"
    if got.dtype != ref.dtype:
        return f"{name}: dtype torch.{got.dtype} but expected torch.{ref.dtype}"
    return None


def _placed(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """`got`, which lived on `ref`'s device, back there: an empty tensor travels as CPU bytes."""
    return got if got.device == ref.device else got.to(ref.device)


def outputs_against(ref_leaves: list, items) -> tuple[list, str | None]:
    """The sandbox's output leaves decoded and placed on their reference's devices, and None; or the
    first output that lived otherwise than the reference's, said. Leaves of another count go back as
    they are: checks.compare_outputs says how many."""
    got, facts = decode_leaves(items)
    if len(got) != len(ref_leaves):
        return got, None
    placed = []
    for i, (r, g, f) in enumerate(zip(ref_leaves, got, facts)):
        if isinstance(r, torch.Tensor) and f is not None:
            name = label(i, len(ref_leaves))
            wrong = differs(Facts.of(r), f, name)
            if wrong:
                return got, wrong
            if g is None:  # facts alone, though they match the reference's (a reference on `meta`)
                return got, f"{name} could not be read (a tensor on {f.device} of layout {f.layout})"
            g = _placed(g, r)
        placed.append(g)
    return placed, None


def input_changed(ref_inputs: list, items) -> str | None:
    """None when forward left every input tensor as the reference leaves it (where it lives, its shape,
    dtype and values); else what forward changed."""
    got, facts = decode_leaves(items)
    if len(got) != len(ref_inputs):
        return "the inputs came back changed in number"
    for i, (r, g, f) in enumerate(zip(ref_inputs, got, facts)):
        if not isinstance(r, torch.Tensor):
            continue
        said = f"forward modified its input {i} in place (the reference does not)"
        wrong = differs(Facts.of(r), f, f"input {i}") if f is not None else None
        if wrong:
            return f"{said}: {wrong}"
        if not isinstance(g, torch.Tensor):  # a number, or facts alone (unreadable), where a tensor was
            return said
        if r.numel() and not torch.equal(_placed(g, r), r):  # empty: the facts were all there is
            return said
    return None


def facts_differ(ref: list[Facts | None], items) -> str | None:
    """What differs between the reference's output tensors (`ref`: their facts) and the facts a
    sandbox sent of its own (a judge-timed batch's last call); None where they agree or their counts
    differ (the checksums' count says that)."""
    _, got = decode_leaves(items)
    if len(got) != len(ref):
        return None
    for i, (r, g) in enumerate(zip(ref, got)):
        if r is not None and g is not None:
            wrong = differs(r, g, label(i, len(ref)))
            if wrong:
                return wrong
    return None
