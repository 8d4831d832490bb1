"""Messages between the judge and a candidate sandbox.

The sandbox runs untrusted code, so nothing it sends is unpickled with globals: messages are
pickles of plain values only (dict, list, tuple, str, bytes, numbers, None), and tensors
travel as data: raw bytes for CPU tensors, a CUDA IPC handle for CUDA tensors (no copy; the
judge maps the sandbox's memory read-side). Whatever the sandbox returned, the judge rebuilds a
plain dense `torch.Tensor` from memory, so subclasses and lazy tensors cannot cross. Every tensor
message also says where the tensor lived (`on`: its device, `layout`): an empty CUDA tensor travels as
CPU bytes, and a tensor on a device without readable memory (`meta`) or of another layout travels as
those facts alone (kind "facts"), so that the judge can say what differs instead of failing to read it.
"""

from __future__ import annotations

import functools
import io
import pickle
from multiprocessing.connection import Connection
from typing import Any, cast

# torch is imported where tensors are handled, so that the pool side (and the CLI) starts fast.


@functools.cache
def _dtypes() -> dict:
    import torch

    names = [
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "complex64",
        "complex128",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "float8_e4m3fn",
        "float8_e5m2",
        "uint16",
        "uint32",
        "uint64",
    ]
    return {n: getattr(torch, n) for n in names if hasattr(torch, n)}


class ProtocolError(Exception):
    """A message that breaks the protocol (from a broken or hostile sandbox)."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # noqa: D401 - pickle hook
        raise ProtocolError(f"message refers to {module}.{name}; only plain values are accepted")


def dumps(obj) -> bytes:
    return pickle.dumps(obj, protocol=5)


def loads(data: bytes):
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except ProtocolError:
        raise
    except Exception as exc:  # truncated or garbage bytes
        raise ProtocolError(f"unreadable message: {exc}") from None


def tensor_facts(t) -> dict:
    """Where and how a tensor lives, in plain values: its device ("cuda:0"), layout ("strided"),
    dtype ("float32") and shape."""
    return {
        "on": str(t.device),
        "layout": str(t.layout).removeprefix("torch."),
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
    }


def encode_tensor(t) -> dict:
    """Sandbox side. Caller keeps `t` alive until the judge acknowledges (CUDA IPC). A tensor whose
    memory cannot be sent (another device type, another layout) goes as its facts alone."""
    import torch

    dtype = str(t.dtype).removeprefix("torch.")
    facts = tensor_facts(t)
    if t.device.type not in ("cpu", "cuda") or t.layout != torch.strided:
        return {"kind": "facts", **facts}
    return {**_encode_data(t, dtype), "on": facts["on"], "layout": facts["layout"]}


def _encode_data(t, dtype: str) -> dict:
    import torch

    if t.is_cuda and t.numel():  # an empty CUDA tensor has no memory to share (its IPC handle is None)
        from torch.multiprocessing.reductions import reduce_tensor

        t = t.detach()
        # torch's stub unions every tensor kind's reduction; a dense CUDA tensor gives the 15-tuple below
        _fn, a = cast("tuple[Any, tuple[Any, ...]]", reduce_tensor(t))
        # a: cls, size, stride, offset, storage_cls, dtype, device, handle, size_bytes,
        #    offset_bytes, requires_grad, ref_counter_handle, ref_counter_offset, event_handle, event_sync
        return {
            "kind": "cuda",
            "dtype": dtype,
            "shape": list(a[1]),
            "stride": list(a[2]),
            "offset": int(a[3]),
            "device": int(a[6]),
            "handle": a[7],
            "size_bytes": int(a[8]),
            "offset_bytes": int(a[9]),
            "rc_handle": a[11],
            "rc_offset": int(a[12]),
            "event_handle": a[13],
            "event_sync": bool(a[14]),
        }
    if not t.numel():  # nothing to copy, wherever it lives: shape and dtype are the whole message
        return {"kind": "cpu", "dtype": dtype, "shape": list(t.shape), "data": b""}
    flat = t.detach().contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes()
    return {"kind": "cpu", "dtype": dtype, "shape": list(t.shape), "data": data}


def decode_tensor(msg: dict):
    """Judge side: rebuild a plain tensor from a message; ProtocolError if it is malformed."""
    import torch

    try:
        dtype = _dtypes()[msg["dtype"]]
        shape = torch.Size(int(s) for s in msg["shape"])
        if msg["kind"] == "cpu":
            data = msg["data"]
            expected = shape.numel() * torch.empty((), dtype=dtype).element_size()
            if len(data) != expected:
                raise ProtocolError(f"tensor data holds {len(data)} bytes, its shape needs {expected}")
            if expected == 0:
                return torch.empty(shape, dtype=dtype)
            flat = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
            return flat.reshape(shape)
        if msg["kind"] == "cuda":
            from torch.multiprocessing.reductions import rebuild_cuda_tensor

            return rebuild_cuda_tensor(
                torch.Tensor,
                shape,
                tuple(int(s) for s in msg["stride"]),
                int(msg["offset"]),
                torch.storage.TypedStorage,
                dtype,
                int(msg["device"]),
                bytes(msg["handle"]),
                int(msg["size_bytes"]),
                int(msg["offset_bytes"]),
                False,
                bytes(msg["rc_handle"]),
                int(msg["rc_offset"]),
                msg["event_handle"] and bytes(msg["event_handle"]),
                bool(msg["event_sync"]),
            )
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"malformed tensor message: {type(exc).__name__}: {exc}") from None
    raise ProtocolError(f"unknown tensor kind {msg.get('kind')!r}")


class Channel:
    """A framed, plain-values message channel over a socket or pipe connection."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def send(self, obj) -> None:
        self.conn.send_bytes(dumps(obj))

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def recv(self, max_bytes: int | None = None):
        return loads(self.conn.recv_bytes(max_bytes))

    def close(self) -> None:
        self.conn.close()
